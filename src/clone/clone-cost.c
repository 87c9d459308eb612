/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clone/clone-cost.h"
#include "clone/clone-file.h"
#include "clone/freeze.h"
#include "util/alloc-util.h"
#include "util/dircursor.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/macro.h"
#include "util/u64map.h"

typedef struct Level {
	char **names;
	size_t n, next;
	bool live; /* the live tree has this directory too (its cursor is there) */
} Level;

typedef struct Walk {
	DirCursor copy, live;
	Level *levels;
	size_t depth, cap;
	uint64_t mem;
	U64Map seen; /* inodes of hard-linked files measured already */
} Walk;

static void level_free(Level *l)
{
	names_free(l->names, l->n);
}

/* Reads the names of the copy's current directory into a new level. -ENOBUFS past the memory bound. */
static int push_level(Walk *w, bool live)
{
	Level l = { .live = live };
	int r;

	r = dir_read_names(dircursor_fd(&w->copy), false, &w->mem, CLONE_COST_MEM_MAX, &l.names, &l.n);
	if (r == 0 && GROW_ARRAY(w->levels, w->cap, w->depth + 1, 16) < 0)
		r = -ENOMEM;
	if (r < 0) {
		level_free(&l);
		return r;
	}
	w->levels[w->depth++] = l;
	return 0;
}

static int add_unshared(void *userdata, uint64_t offset, uint64_t length, bool hole)
{
	uint64_t *sum = userdata;

	if (!hole)
		*sum += length; /* data of the copy that the live file does not share */
	return 0;
}

static int measure_file(Walk *w, const Level *l, const char *name, const struct stat *st, CloneCost *c)
{
	_cleanup_close_ int cfd = -EBADF, lfd = -EBADF;
	struct stat lst;
	uint64_t dummy;

	if (st->st_nlink > 1) {
		if (u64map_get(&w->seen, (uint64_t)st->st_ino, &dummy))
			return 0;
		if (u64map_put(&w->seen, (uint64_t)st->st_ino, 1) < 0)
			return -ENOMEM;
	}
	/* O_NONBLOCK: a lease on the copy's file (nobody should hold one) never holds the walk. */
	cfd = openat(dircursor_fd(&w->copy), name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (cfd < 0)
		return 0; /* gone or unreadable: nothing to count */
	if (l->live) {
		lfd = openat(dircursor_fd(&w->live), name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
		if (lfd >= 0 && (fstat(lfd, &lst) < 0 || !S_ISREG(lst.st_mode))) {
			(void)close(lfd);
			lfd = -EBADF; /* not a file any more: all of the copy's data counts */
		}
	}
	c->files++;
	return clone_file_diff(cfd, (uint64_t)st->st_size, lfd, add_unshared, &c->unshared_bytes);
}

int clone_cost(int copy_fd, int live_fd, unsigned budget_ms, CloneCost *ret, char **reterr_msg)
{
	uint64_t deadline = freeze_now_us() + (uint64_t)budget_ms * 1000;
	Walk w = { 0 };
	CloneCost c = { 0 };
	int r;

	r = dircursor_init(&w.copy, copy_fd);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot open the snapshot: %s", errno_str(r));
	r = dircursor_init(&w.live, live_fd);
	if (r < 0) {
		dircursor_done(&w.copy);
		return errmsg_set(reterr_msg, r, "cannot open the volume: %s", errno_str(r));
	}
	r = push_level(&w, true);
	while (r == 0 && w.depth > 0) {
		Level *l = &w.levels[w.depth - 1];
		struct stat st;
		const char *name;

		if (freeze_now_us() > deadline) {
			r = -ETIME;
			break;
		}
		if (l->next == l->n) {
			bool live = l->live;

			level_free(l);
			w.depth--;
			if (w.depth == 0)
				break;
			r = dircursor_pop(&w.copy);
			if (r == 0 && live)
				r = dircursor_pop(&w.live);
			continue;
		}
		name = l->names[l->next++];
		if (dircursor_stat(&w.copy, name, &st) < 0)
			continue; /* gone, or a mount point: not the copy's */
		if (S_ISREG(st.st_mode))
			r = measure_file(&w, l, name, &st, &c);
		else if (S_ISDIR(st.st_mode) && dircursor_push(&w.copy, name) == 0) {
			bool live = l->live && dircursor_push(&w.live, name) == 0;

			r = push_level(&w, live);
		}
	}
	c.complete = r == 0;
	for (size_t i = 0; i < w.depth; i++)
		level_free(&w.levels[i]);
	free(w.levels);
	u64map_done(&w.seen);
	dircursor_done(&w.copy);
	dircursor_done(&w.live);
	if (r < 0 && r != -ETIME && r != -ENOBUFS && r != -ESTALE)
		return errmsg_set(reterr_msg, r, "cannot measure the snapshot: %s", errno_str(r));
	*ret = c;
	return 0;
}
