/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clone/clone-file.h"
#include "stream/send-tree.h"
#include "util/alloc-util.h"
#include "util/dircursor.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/io-util.h"
#include "util/macro.h"
#include "util/u64map.h"
#include "util/xattr-util.h"

typedef struct Level {
	char **names_new, **names_old;
	size_t n_new, n_old, i_new, i_old;
	uint64_t mem;
	bool old;       /* the old tree has this directory too (its cursor is there) */
	bool dirty;     /* a name in it was made or deleted: its times changed on the receiver */
	char *path;     /* relative; "" at the root */
	struct stat st_new, st_old;
} Level;

/* A file of the new tree at a new name that is a file of the old tree at a deleted name: a rename. */
typedef struct Rename {
	char *new_path, *old_path;
} Rename;

/* A changed range of a file waiting to be sent. */
typedef struct Range {
	uint64_t off, len;
	bool hole;
} Range;

/*
 * Changed ranges are queued and their reads started (WILLNEED) before the first is read: scattered
 * blocks of a snapshot that is not in the page cache (a database's pages since the last pass) are
 * then read with many requests in flight, not one random read at a time (tests/bench/RESULTS.md §8).
 * Up to this many ranges, or this many bytes of small ranges, a batch.
 */
#define PREFETCH_RANGES 1024
#define PREFETCH_RANGE_MAX (1u << 20) /* longer ranges are read ahead by the kernel's own sequential readahead */
#define PREFETCH_BYTES (64u << 20)

typedef struct Sender {
	DirCursor new, old;
	bool has_old;
	Level *levels;
	size_t depth, cap;
	uint64_t mem;
	U64Map links;     /* inode of the new tree -> index + 1 in link_paths */
	char **link_paths;
	size_t n_links, cap_links;
	SendWriter w;
	SendTreeStats st;
	uint8_t *buf;     /* SEND_WRITE_MAX */
	char *why;
	/* Renames found by the first pass, sorted by new_path; each old file is linked at stash/INDEX first. */
	Rename *renames;
	size_t n_renames, cap_renames;
	char stash[64];
	Range *queue; /* PREFETCH_RANGES: the current file's changed ranges not sent yet */
	size_t n_queue;
	uint64_t queued; /* bytes of them being read ahead */
} Sender;

static void level_free(Level *l)
{
	names_free(l->names_new, l->n_new);
	names_free(l->names_old, l->n_old);
	free(l->path);
}

static char *join(const char *dir, const char *name)
{
	char *p = NULL;

	if (asprintf(&p, "%s%s%s", dir, dir[0] ? "/" : "", name) < 0)
		return NULL;
	return p;
}

/* Enters a directory: its names (and the old tree's, with @old), read into a new level. */
static int push_level(Sender *s, const char *path, bool old, const struct stat *st_new, const struct stat *st_old)
{
	Level l = { .old = old, .st_new = *st_new };
	uint64_t before = s->mem;
	int r;

	if (old)
		l.st_old = *st_old;
	l.path = strdup(path);
	if (!l.path)
		return -ENOMEM;
	r = dir_read_names(dircursor_fd(&s->new), true, &s->mem, SEND_TREE_MEM_MAX, &l.names_new, &l.n_new);
	if (r == 0 && old)
		r = dir_read_names(dircursor_fd(&s->old), true, &s->mem, SEND_TREE_MEM_MAX, &l.names_old, &l.n_old);
	if (r == 0 && GROW_ARRAY(s->levels, s->cap, s->depth + 1, 16) < 0)
		r = -ENOMEM;
	if (r < 0) {
		level_free(&l);
		s->mem = before;
		return r == -ENOBUFS ? errmsg_set(&s->why, r, "more than %llu MiB of names in one path of directories",
						  SEND_TREE_MEM_MAX >> 20) : r;
	}
	l.mem = s->mem - before;
	s->levels[s->depth++] = l;
	return 0;
}

/* The attributes of @fd if open (>= 0), else of @name in @dirfd. */
static int xattrs_of(int fd, int dirfd, const char *name, void **ret, size_t *ret_len)
{
	XattrTarget t = { .fd = fd, .dirfd = dirfd, .name = name };
	int r = xattr_blob_read(&t, ret, ret_len);

	/* A filesystem without attributes has none to send. */
	return r == -EOPNOTSUPP ? 0 : r;
}

/*
 * SETATTR of @name (new tree, at the cursor) when it differs from the old one's (@old NULL: always);
 * the attributes are read through @new_fd and @old_fd when they are open (a regular file's are:
 * two opens and closes less per file).
 */
static int send_meta_fd(Sender *s, const char *path, int new_dir, int new_fd, const char *name, const struct stat *st,
			int old_dir, int old_fd, const struct stat *old, bool force)
{
	_cleanup_free_ void *a = NULL, *b = NULL;
	size_t alen = 0, blen = 0;
	int r;

	r = xattrs_of(new_fd, new_dir, name, &a, &alen);
	if (r < 0)
		return errmsg_set(&s->why, r, "cannot read the attributes of %s: %s", path, errno_str(r));
	if (!force && old) {
		if (old->st_uid == st->st_uid && old->st_gid == st->st_gid &&
		    (old->st_mode & 07777) == (st->st_mode & 07777) && old->st_mtim.tv_sec == st->st_mtim.tv_sec &&
		    old->st_mtim.tv_nsec == st->st_mtim.tv_nsec && old->st_atim.tv_sec == st->st_atim.tv_sec &&
		    old->st_atim.tv_nsec == st->st_atim.tv_nsec) {
			r = xattrs_of(old_fd, old_dir, name, &b, &blen);
			if (r < 0)
				return errmsg_set(&s->why, r, "cannot read the attributes of %s: %s", path, errno_str(r));
			if (xattr_blob_equal(a, alen, b, blen))
				return 0;
		}
	}
	return send_put_setattr(&s->w, path, st, a, alen);
}

static int send_meta(Sender *s, const char *path, int new_dir, const char *name, const struct stat *st,
		     int old_dir, const struct stat *old, bool force)
{
	return send_meta_fd(s, path, new_dir, -EBADF, name, st, old_dir, -EBADF, old, force);
}

typedef struct Ranges {
	Sender *s;
	const char *path;
	int fd;
	bool sent; /* a WRITE or HOLE went: the receiver's file got new times */
} Ranges;

/* One changed range of a file: its data (read now) in WRITE records, or a HOLE. */
static int send_one(Ranges *g, const Range *rg)
{
	Sender *s = g->s;
	uint64_t offset = rg->off, length = rg->len;

	g->sent = true;
	if (rg->hole)
		return send_put_range(&s->w, SEND_HOLE, g->path, offset, length);
	while (length > 0) {
		size_t n = (size_t)(length < SEND_WRITE_MAX ? length : SEND_WRITE_MAX);
		ssize_t k = pread(g->fd, s->buf, n, (off_t)offset);
		int r;

		if (k < 0)
			return errmsg_set(&s->why, negative_errno(), "cannot read %s: %s", g->path, errno_str(errno));
		if (k == 0)
			break; /* the file is shorter: the TRUNCATE that follows says its size */
		r = send_put_write(&s->w, g->path, offset, s->buf, (size_t)k);
		if (r < 0)
			return r;
		s->st.data_bytes += (uint64_t)k;
		offset += (uint64_t)k;
		length -= (uint64_t)k;
	}
	return 0;
}

/* Sends the queued ranges, in order. */
static int send_queued(Ranges *g)
{
	int r = 0;

	for (size_t i = 0; r == 0 && i < g->s->n_queue; i++)
		r = send_one(g, &g->s->queue[i]);
	g->s->n_queue = 0;
	g->s->queued = 0;
	return r;
}

/* clone_file_diff()'s callback: queues the range, starting the read of a short one. */
static int send_range(void *userdata, uint64_t offset, uint64_t length, bool hole)
{
	Ranges *g = userdata;
	Sender *s = g->s;

	s->queue[s->n_queue++] = (Range){ offset, length, hole };
	if (!hole && length <= PREFETCH_RANGE_MAX) {
		(void)posix_fadvise(g->fd, (off_t)offset, (off_t)length, POSIX_FADV_WILLNEED);
		s->queued += length;
	}
	return s->n_queue == PREFETCH_RANGES || s->queued >= PREFETCH_BYTES ? send_queued(g) : 0;
}

static int open_file(int dirfd, const char *name)
{
	return openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
}

static int rename_cmp(const void *a, const void *b)
{
	return strcmp(((const Rename *)a)->new_path, ((const Rename *)b)->new_path);
}

/*
 * Whether the new file @path is a renamed old one: then it is moved from the
 * stash to @path (RENAME), and *ret_fd, *ret_st are the old file's (1).
 */
static int renamed_from(Sender *s, const char *path, int *ret_fd, struct stat *ret_st)
{
	Rename key = { .new_path = (char *)path }, *m;
	char stashed[96];
	int fd, r;

	m = s->n_renames ? bsearch(&key, s->renames, s->n_renames, sizeof(*m), rename_cmp) : NULL;
	if (!m)
		return 0;
	fd = openat(s->old.levels[0].fd, m->old_path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0 || fstat(fd, ret_st) < 0 || !S_ISREG(ret_st->st_mode)) {
		if (fd >= 0)
			(void)close(fd);
		return 0; /* sent as a new file */
	}
	snprintf(stashed, sizeof(stashed), "%s/%zu", s->stash, (size_t)(m - s->renames));
	r = send_put_two(&s->w, SEND_RENAME, stashed, path);
	if (r < 0) {
		(void)close(fd);
		return r;
	}
	*ret_fd = fd;
	return 1;
}

/*
 * A regular file of the new tree: a link to an earlier path of its inode, an
 * update in place of the old tree's file (@old, NULL when none or unusable),
 * or a new file.
 */
static int send_file(Sender *s, const char *path, const char *name, const struct stat *st, const struct stat *old)
{
	_cleanup_close_ int fd = -EBADF, ofd = -EBADF;
	struct stat ost;
	uint64_t idx;
	Ranges g = { .s = s, .path = path };
	int r;

	if (st->st_nlink > 1 && u64map_get(&s->links, (uint64_t)st->st_ino, &idx)) {
		if (old && (r = send_put_path(&s->w, SEND_UNLINK, path, 0)) < 0)
			return r;
		s->levels[s->depth - 1].dirty = true;
		return send_put_two(&s->w, SEND_LINK, path, s->link_paths[idx - 1]);
	}
	if (st->st_nlink > 1) {
		char *copy = strdup(path);

		s->mem += strlen(path) + 1 + sizeof(char *);
		if (!copy || s->mem > SEND_TREE_MEM_MAX || GROW_ARRAY(s->link_paths, s->cap_links, s->n_links + 1, 64) < 0) {
			free(copy);
			return errmsg_set(&s->why, -ENOBUFS, "more than %llu MiB of names of hard-linked files",
					  SEND_TREE_MEM_MAX >> 20);
		}
		s->link_paths[s->n_links++] = copy;
		if (u64map_put(&s->links, (uint64_t)st->st_ino, s->n_links) < 0)
			return -ENOMEM;
	}
	fd = open_file(dircursor_fd(&s->new), name);
	if (fd < 0)
		return errmsg_set(&s->why, negative_errno(), "cannot open %s: %s", path, errno_str(errno));
	g.fd = fd;
	/* In place only where the old file had this one name: else its other names would change too. */
	if (old && old->st_nlink == 1)
		ofd = open_file(dircursor_fd(&s->old), name);
	else if (!old && (r = renamed_from(s, path, &ofd, &ost)) != 0) {
		if (r < 0)
			return r;
		s->levels[s->depth - 1].dirty = true;
		old = &ost;
	}
	if (ofd < 0) {
		if (old && (r = send_put_path(&s->w, SEND_UNLINK, path, 0)) < 0)
			return r;
		s->levels[s->depth - 1].dirty = true;
		if ((r = send_put_path(&s->w, SEND_CREATE, path, 0600)) < 0)
			return r;
		old = NULL;
	}
	r = clone_file_diff(fd, (uint64_t)st->st_size, ofd, send_range, &g);
	if (r == 0)
		r = send_queued(&g);
	s->n_queue = 0; /* what an error left queued is dropped with the stream */
	s->queued = 0;
	if (r < 0)
		return s->why ? r : errmsg_set(&s->why, r, "cannot compare the extents of %s: %s", path, errno_str(r));
	if (!old || old->st_size != st->st_size) {
		g.sent = true;
		if ((r = send_put_range(&s->w, SEND_TRUNCATE, path, (uint64_t)st->st_size, 0)) < 0)
			return r;
	}
	/*
	 * A renamed file's old attributes are read by its old name's directory:
	 * compare the stat alone. A file written to has new times on the
	 * receiver, even where the two snapshots' times are the same (the same
	 * bytes in other blocks: a change the clone's frozen pass carried into a
	 * snapshot): its metadata goes again.
	 */
	if (ofd >= 0 && old == &ost)
		return send_meta_fd(s, path, dircursor_fd(&s->new), fd, name, st, -EBADF, -EBADF, NULL, true);
	return send_meta_fd(s, path, dircursor_fd(&s->new), fd, name, st, dircursor_fd(&s->old), ofd, old, g.sent);
}

static int send_delete(Sender *s, const char *path, const struct stat *old)
{
	s->levels[s->depth - 1].dirty = true;
	return send_put_path(&s->w, S_ISDIR(old->st_mode) ? SEND_RMDIR : SEND_UNLINK, path, 0);
}

/* A symlink or special file: made anew when it is new or differs, then its metadata. */
static int send_other(Sender *s, const char *path, const char *name, const struct stat *st, const struct stat *old)
{
	char target[SEND_PATH_MAX + 2], otarget[SEND_PATH_MAX + 2];
	bool same = false;
	ssize_t n;
	int r;

	if (S_ISLNK(st->st_mode)) {
		n = readlinkat(dircursor_fd(&s->new), name, target, sizeof(target) - 1);
		if (n < 0 || n > SEND_PATH_MAX)
			return errmsg_set(&s->why, n < 0 ? negative_errno() : -ENAMETOOLONG,
					  "cannot read symlink %s (or its target is over %d bytes)", path, SEND_PATH_MAX);
		target[n] = '\0';
		if (old) {
			ssize_t m = readlinkat(dircursor_fd(&s->old), name, otarget, sizeof(otarget) - 1);

			same = m == n && memcmp(target, otarget, (size_t)n) == 0;
		}
	} else
		same = old && old->st_rdev == st->st_rdev;
	if (old && !same) {
		if ((r = send_delete(s, path, old)) < 0)
			return r;
		old = NULL;
	}
	if (!old) {
		s->levels[s->depth - 1].dirty = true;
		r = S_ISLNK(st->st_mode) ? send_put_two(&s->w, SEND_SYMLINK, path, target)
					 : send_put_mknod(&s->w, path, (uint32_t)(st->st_mode & (S_IFMT | 07777)),
							  (uint64_t)st->st_rdev);
		if (r < 0)
			return r;
	}
	return send_meta(s, path, dircursor_fd(&s->new), name, st, dircursor_fd(&s->old), old, false);
}

/* One name of the current level: in the new tree (@st), the old one (@old), or both. */
static int send_entry(Sender *s, const char *name, const struct stat *st, const struct stat *old)
{
	Level *l = &s->levels[s->depth - 1];
	_cleanup_free_ char *path = join(l->path, name);
	int r;

	if (!path)
		return -ENOMEM;
	if (strlen(path) > SEND_PATH_MAX)
		return errmsg_set(&s->why, -ENAMETOOLONG, "%.200s...: a path longer than %d bytes, the most a stream holds",
				  path, SEND_PATH_MAX);
	if (!st)
		return send_delete(s, path, old);
	s->st.entries++;
	if (old && (old->st_mode & S_IFMT) != (st->st_mode & S_IFMT)) {
		if ((r = send_delete(s, path, old)) < 0)
			return r;
		old = NULL;
	}
	if (S_ISDIR(st->st_mode)) {
		bool in_old;

		if (!old) {
			l->dirty = true;
			if ((r = send_put_path(&s->w, SEND_MKDIR, path, 0700)) < 0)
				return r;
		}
		r = dircursor_push(&s->new, name);
		if (r < 0)
			return errmsg_set(&s->why, r, "cannot enter %s: %s", path, errno_str(r));
		in_old = old != NULL;
		if (in_old && (r = dircursor_push(&s->old, name)) < 0) {
			(void)dircursor_pop(&s->new);
			return errmsg_set(&s->why, r, "cannot enter %s in the base snapshot: %s", path, errno_str(r));
		}
		r = push_level(s, path, in_old, st, old);
		if (r < 0)
			return r;
		s->levels[s->depth - 1].dirty = !old; /* a new directory gets its metadata in any case */
		return 0;
	}
	if (S_ISREG(st->st_mode))
		return send_file(s, path, name, st, old && S_ISREG(old->st_mode) ? old : NULL);
	return send_other(s, path, name, st, old);
}

/* Leaves the current directory: its metadata (now that nothing more changes in it), then up. */
static int pop_level(Sender *s)
{
	Level *l = &s->levels[s->depth - 1];
	bool old = l->old;
	int r;

	if (l->path[0] == '\0' && s->stash[0] && (r = send_put_path(&s->w, SEND_RMDIR, s->stash, 0)) < 0)
		return r;
	if (l->path[0] == '\0')
		r = send_meta(s, "", dircursor_fd(&s->new), ".", &l->st_new, old ? dircursor_fd(&s->old) : -EBADF,
			      old ? &l->st_old : NULL, l->dirty || s->stash[0]);
	else {
		/* Read from the parent: the directory's own name there. */
		_cleanup_free_ char *path = strdup(l->path);
		struct stat st = l->st_new, ost = l->st_old;
		bool dirty = l->dirty;
		const char *name;

		if (!path)
			return -ENOMEM;
		name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
		r = dircursor_pop(&s->new);
		if (r == 0 && old)
			r = dircursor_pop(&s->old);
		if (r < 0)
			return errmsg_set(&s->why, r, "cannot go back up from %s: %s", path, errno_str(r));
		s->mem -= l->mem;
		level_free(l);
		s->depth--;
		return send_meta(s, path, dircursor_fd(&s->new), name, &st, dircursor_fd(&s->old), old ? &ost : NULL,
				 dirty);
	}
	s->mem -= l->mem;
	level_free(l);
	s->depth--;
	return r;
}

/* ---- the first pass: renames ---- */

typedef struct ScanLevel {
	char **names_new, **names_old;
	size_t n_new, n_old, i_new, i_old;
	bool in_new, in_old;
	char *path;
} ScanLevel;

typedef struct Cand {
	uint64_t key; /* the first data block */
	char *path;
} Cand;

typedef struct Scan {
	DirCursor new, old;
	ScanLevel *levels;
	size_t depth, cap;
	uint64_t mem, mem_max;
	Cand *old_c, *new_c;
	size_t n_old, n_new, cap_old, cap_new;
} Scan;

static void scan_level_free(ScanLevel *l)
{
	names_free(l->names_new, l->n_new);
	names_free(l->names_old, l->n_old);
	free(l->path);
}

static int scan_push(Scan *c, const char *path, bool in_new, bool in_old)
{
	ScanLevel l = { .in_new = in_new, .in_old = in_old, .path = strdup(path) };
	int r = l.path ? 0 : -ENOMEM;

	if (r == 0 && in_new)
		r = dir_read_names(dircursor_fd(&c->new), true, &c->mem, c->mem_max, &l.names_new, &l.n_new);
	if (r == 0 && in_old)
		r = dir_read_names(dircursor_fd(&c->old), true, &c->mem, c->mem_max, &l.names_old, &l.n_old);
	if (r == 0 && GROW_ARRAY(c->levels, c->cap, c->depth + 1, 16) < 0)
		r = -ENOMEM;
	if (r < 0) {
		scan_level_free(&l);
		return r;
	}
	c->levels[c->depth++] = l;
	return 0;
}

/* A file with one name and data at a name only one tree has: a candidate, keyed by its first block. */
static int scan_file(Scan *c, DirCursor *cur, const char *path, const char *name, const struct stat *st, bool is_new)
{
	_cleanup_close_ int fd = -EBADF;
	uint64_t key = 0;
	Cand **v = is_new ? &c->new_c : &c->old_c;
	size_t *n = is_new ? &c->n_new : &c->n_old, *cap = is_new ? &c->cap_new : &c->cap_old;
	char *p;

	if (!S_ISREG(st->st_mode) || st->st_nlink != 1 || st->st_size == 0)
		return 0;
	fd = open_file(dircursor_fd(cur), name);
	if (fd < 0 || clone_file_first_block(fd, &key) < 0 || key == 0)
		return 0;
	c->mem += strlen(path) + 1 + sizeof(Cand);
	if (c->mem > c->mem_max)
		return -ENOBUFS;
	p = strdup(path);
	if (!p || GROW_ARRAY(*v, *cap, *n + 1, 64) < 0) {
		free(p);
		return -ENOMEM;
	}
	(*v)[(*n)++] = (Cand){ .key = key, .path = p };
	return 0;
}

static int scan_walk(Scan *c)
{
	int r = scan_push(c, "", true, true);

	while (r == 0 && c->depth > 0) {
		ScanLevel *l = &c->levels[c->depth - 1];
		const char *nn = l->i_new < l->n_new ? l->names_new[l->i_new] : NULL;
		const char *on = l->i_old < l->n_old ? l->names_old[l->i_old] : NULL;
		_cleanup_free_ char *path = NULL;
		struct stat st, ost;
		bool has_new, has_old, in_new, in_old;
		int cmp;

		if (!nn && !on) {
			in_new = l->in_new;
			in_old = l->in_old;
			scan_level_free(l);
			if (--c->depth == 0)
				break;
			if (in_new)
				r = dircursor_pop(&c->new);
			if (r == 0 && in_old)
				r = dircursor_pop(&c->old);
			continue;
		}
		cmp = !nn ? 1 : !on ? -1 : strcmp(nn, on);
		has_new = cmp <= 0 && dircursor_stat(&c->new, nn, &st) == 0;
		has_old = cmp >= 0 && dircursor_stat(&c->old, on, &ost) == 0;
		if (cmp <= 0)
			l->i_new++;
		if (cmp >= 0)
			l->i_old++;
		path = join(l->path, cmp <= 0 ? nn : on);
		if (!path)
			return -ENOMEM;
		if (has_new && has_old && (st.st_mode & S_IFMT) == (ost.st_mode & S_IFMT)) {
			/* The same name in both: a file is compared in place, a directory entered. */
			if (S_ISDIR(st.st_mode) && dircursor_push(&c->new, nn) == 0) {
				if (dircursor_push(&c->old, on) == 0)
					r = scan_push(c, path, true, true);
				else
					r = dircursor_pop(&c->new);
			}
			continue;
		}
		if (has_new && S_ISDIR(st.st_mode)) {
			if (dircursor_push(&c->new, nn) == 0 && (r = scan_push(c, path, true, false)) < 0)
				break;
		} else if (has_new)
			r = scan_file(c, &c->new, path, nn, &st, true);
		if (r < 0)
			break;
		if (has_old && S_ISDIR(ost.st_mode)) {
			if (dircursor_push(&c->old, on) == 0)
				r = scan_push(c, path, false, true);
		} else if (has_old)
			r = scan_file(c, &c->old, path, on, &ost, false);
	}
	return r;
}

/* Finds the renames (the first pass), then links each renamed file in the stash before anything changes. */
static int find_renames(Sender *s, int new_fd, int old_fd)
{
	Scan c = { .mem_max = SEND_TREE_MEM_MAX / 2 };
	U64Map olds = { 0 };
	struct stat st;
	uint64_t idx;
	int r;

	if (dircursor_init(&c.new, new_fd) < 0)
		return 0;
	if (dircursor_init(&c.old, old_fd) < 0) {
		dircursor_done(&c.new);
		return 0;
	}
	r = scan_walk(&c);
	for (size_t i = 0; r == 0 && i < c.n_old; i++)
		if (!u64map_get(&olds, c.old_c[i].key, &idx) && u64map_put(&olds, c.old_c[i].key, i + 1) < 0)
			r = -ENOMEM;
	for (size_t i = 0; r == 0 && i < c.n_new; i++) {
		if (!u64map_get(&olds, c.new_c[i].key, &idx) || idx == 0)
			continue;
		if (GROW_ARRAY(s->renames, s->cap_renames, s->n_renames + 1, 16) < 0) {
			r = -ENOMEM;
			break;
		}
		s->renames[s->n_renames++] = (Rename){ .new_path = TAKE_PTR(c.new_c[i].path),
						       .old_path = TAKE_PTR(c.old_c[idx - 1].path) };
		(void)u64map_put(&olds, c.new_c[i].key, 0); /* each old file is renamed once */
	}
	/* Past the memory bound, or a directory that went away: no renames, only deletes and creates. */
	if (r == -ENOBUFS || r == -ESTALE || r == -ENOENT)
		r = 0;
	for (size_t i = 0; i < c.depth; i++)
		scan_level_free(&c.levels[i]);
	free(c.levels);
	for (size_t i = 0; i < c.n_old; i++)
		free(c.old_c[i].path);
	for (size_t i = 0; i < c.n_new; i++)
		free(c.new_c[i].path);
	free(c.old_c);
	free(c.new_c);
	u64map_done(&olds);
	dircursor_done(&c.new);
	dircursor_done(&c.old);
	if (r < 0 || s->n_renames == 0)
		return r;
	qsort(s->renames, s->n_renames, sizeof(*s->renames), rename_cmp);
	/* A name neither tree has at its root. */
	for (unsigned i = 0;; i++) {
		snprintf(s->stash, sizeof(s->stash), ".nvmevol-send-stash%s%.0u", i ? "-" : "", i);
		if (fstatat(new_fd, s->stash, &st, AT_SYMLINK_NOFOLLOW) < 0 &&
		    fstatat(old_fd, s->stash, &st, AT_SYMLINK_NOFOLLOW) < 0)
			break;
	}
	r = send_put_path(&s->w, SEND_MKDIR, s->stash, 0700);
	for (size_t i = 0; r == 0 && i < s->n_renames; i++) {
		char stashed[96];

		snprintf(stashed, sizeof(stashed), "%s/%zu", s->stash, i);
		r = send_put_two(&s->w, SEND_LINK, stashed, s->renames[i].old_path);
	}
	return r;
}

static int walk(Sender *s)
{
	struct stat root_new, root_old;
	int r;

	if (fstat(dircursor_fd(&s->new), &root_new) < 0 || (s->has_old && fstat(dircursor_fd(&s->old), &root_old) < 0))
		return negative_errno();
	r = push_level(s, "", s->has_old, &root_new, &root_old);
	while (r == 0 && s->depth > 0) {
		Level *l = &s->levels[s->depth - 1];
		const char *nn = l->i_new < l->n_new ? l->names_new[l->i_new] : NULL;
		const char *on = l->i_old < l->n_old ? l->names_old[l->i_old] : NULL;
		struct stat st, ost;
		int c;

		if (!nn && !on) {
			r = pop_level(s);
			continue;
		}
		c = !nn ? 1 : !on ? -1 : strcmp(nn, on);
		if (c <= 0)
			l->i_new++;
		if (c >= 0)
			l->i_old++;
		if (c <= 0 && (r = dircursor_stat(&s->new, nn, &st)) < 0)
			return errmsg_set(&s->why, r, "cannot look at %s%s%s in the snapshot: %s", l->path,
					  l->path[0] ? "/" : "", nn, errno_str(r));
		if (c >= 0 && (r = dircursor_stat(&s->old, on, &ost)) < 0)
			return errmsg_set(&s->why, r, "cannot look at %s%s%s in the base snapshot: %s", l->path,
					  l->path[0] ? "/" : "", on, errno_str(r));
		r = send_entry(s, c <= 0 ? nn : on, c <= 0 ? &st : NULL, c >= 0 ? &ost : NULL);
	}
	return r;
}

int send_tree(int new_fd, int old_fd, const char *header_json, int out, volatile sig_atomic_t *stop,
	      SendTreeStats *ret_stats, char **reterr_msg)
{
	Sender s = { .has_old = old_fd >= 0 };
	int r;

	s.buf = malloc(SEND_WRITE_MAX);
	s.queue = malloc(PREFETCH_RANGES * sizeof(*s.queue));
	if (!s.buf || !s.queue) {
		free(s.buf);
		free(s.queue);
		return -ENOMEM;
	}
	r = dircursor_init(&s.new, new_fd);
	if (r == 0)
		r = dircursor_init(&s.old, s.has_old ? old_fd : new_fd);
	if (r < 0) {
		free(s.buf);
		free(s.queue);
		return errmsg_set(reterr_msg, r, "cannot open the snapshots: %s", errno_str(r));
	}
	r = send_writer_init(&s.w, out, stop);
	if (r == 0)
		r = send_put_header(&s.w, header_json);
	if (r == 0 && s.has_old)
		r = find_renames(&s, new_fd, old_fd);
	if (r == 0)
		r = walk(&s);
	if (r == 0)
		r = send_put_end(&s.w);
	s.st.records = s.w.records;
	s.st.bytes = s.w.bytes;
	if (r < 0 && reterr_msg && !*reterr_msg)
		*reterr_msg = s.why ? TAKE_PTR(s.why)
				    : strdup(r == -EINTR ? "interrupted" : r == -EPIPE ? "the reader went away" : errno_str(r));
	for (size_t i = 0; i < s.depth; i++)
		level_free(&s.levels[i]);
	free(s.levels);
	for (size_t i = 0; i < s.n_links; i++)
		free(s.link_paths[i]);
	free(s.link_paths);
	for (size_t i = 0; i < s.n_renames; i++) {
		free(s.renames[i].new_path);
		free(s.renames[i].old_path);
	}
	free(s.renames);
	u64map_done(&s.links);
	send_writer_done(&s.w);
	dircursor_done(&s.new);
	dircursor_done(&s.old);
	free(s.buf);
	free(s.queue);
	free(s.why);
	if (ret_stats)
		*ret_stats = s.st;
	return r;
}
