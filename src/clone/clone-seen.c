/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clone/clone-seen.h"
#include "clone/freeze.h"
#include "device/xfs-bulkstat.h"
#include "util/alloc-util.h"
#include "util/macro.h"

enum {
	SEEN_DIR = 1u << 0,
	SEEN_ROOT = 1u << 1,
	SEEN_CHANGED = 1u << 2, /* the frozen pass compares it */
	SEEN_DESCEND = 1u << 3, /* a directory the frozen pass enters */
	SEEN_HOLDS = 1u << 4,   /* a directory with a name of a hard-linked inode */
	SEEN_LINKED = 1u << 5,  /* not a directory, more than one name when it was read */
	SEEN_GEN = 1u << 6,     /* gen is known */
	SEEN_VISITED = 1u << 7, /* the frozen pass compared it */
};

static bool ts_ns(const struct timespec *ts, int64_t *ret)
{
	/* Times a stat can show but nanoseconds since 1970 in 64 bits cannot (before 1678, after 2262). */
	if (ts->tv_sec > INT64_MAX / 1000000000 - 1 || ts->tv_sec < INT64_MIN / 1000000000 + 1)
		return false;
	*ret = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
	return true;
}

static int64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	int64_t ns = 0;

	(void)clock_gettime(id, &ts);
	(void)ts_ns(&ts, &ns);
	return ns;
}

/* The tick a time falls in (tests may make the clock coarse); the time itself otherwise. */
static int64_t tick(const CloneSeen *s, int64_t ns)
{
	int64_t q;

	if (s->tick_ns <= 0)
		return ns;
	q = ns / s->tick_ns;
	if (ns % s->tick_ns < 0)
		q--;
	return q;
}

static bool checking(const CloneSeen *s, CloneSeenCheck c)
{
	return (s->checks & c) != 0;
}

void clone_seen_init(CloneSeen *s, uint64_t mem_max, bool on)
{
	*s = (CloneSeen){ .mem_max = mem_max, .on = on, .checks = CLONE_SEEN_CHECK_ALL };
}

static void seen_free(CloneSeen *s)
{
	free(s->v);
	free(s->order);
	s->v = NULL;
	s->order = NULL;
	s->n = s->cap = 0;
	s->mem = 0;
}

void clone_seen_done(CloneSeen *s)
{
	seen_free(s);
	s->on = false;
}

void clone_seen_start(CloneSeen *s)
{
	if (!s->on)
		return;
	seen_free(s);
	s->changed = s->checked = 0;
	s->since_ns = clock_ns(CLOCK_REALTIME_COARSE);
	s->clock_off_ns = clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC);
}

static bool charge(CloneSeen *s, uint64_t bytes)
{
	if (s->mem + bytes > s->mem_max) {
		clone_seen_done(s);
		return false;
	}
	s->mem += bytes;
	return true;
}

uint32_t clone_seen_add(CloneSeen *s, const struct stat *st, uint32_t parent)
{
	SeenInode e = { .ino = st->st_ino, .parent = parent, .mode = (uint16_t)st->st_mode };

	if (!s->on)
		return CLONE_SEEN_NONE;
	if (s->n >= CLONE_SEEN_NONE - 1 || !charge(s, sizeof(e) + sizeof(*s->order)) ||
	    GROW_ARRAY(s->v, s->cap, s->n + 1, 1024) < 0) {
		clone_seen_done(s);
		return CLONE_SEEN_NONE;
	}
	if (S_ISDIR(st->st_mode))
		e.flags |= SEEN_DIR;
	if (parent == CLONE_SEEN_NONE)
		e.flags |= SEEN_ROOT;
	if (!ts_ns(&st->st_ctim, &e.ctime_ns) || !ts_ns(&st->st_atim, &e.atime_ns))
		e.flags |= SEEN_CHANGED;
	/* The racy rule: a change later in this tick would leave the change time as it is. */
	else if (checking(s, CLONE_SEEN_CHECK_RACY) && tick(s, e.ctime_ns) >= tick(s, s->since_ns))
		e.flags |= SEEN_CHANGED;
	if (!S_ISDIR(st->st_mode) && st->st_nlink > 1) {
		e.flags |= SEEN_LINKED;
		clone_seen_holds_link(s, parent);
	}
	s->v[s->n] = e;
	return (uint32_t)s->n++;
}

void clone_seen_changed(CloneSeen *s, uint32_t idx)
{
	if (s->on && idx < s->n)
		s->v[idx].flags |= SEEN_CHANGED;
}

void clone_seen_holds_link(CloneSeen *s, uint32_t idx)
{
	if (s->on && idx < s->n)
		s->v[idx].flags |= SEEN_HOLDS;
}

void clone_seen_atime(CloneSeen *s, uint32_t idx, const struct timespec *atime)
{
	if (!s->on || idx >= s->n)
		return;
	if (!ts_ns(atime, &s->v[idx].atime_ns))
		s->v[idx].flags |= SEEN_CHANGED;
}

void clone_seen_clone_ino(CloneSeen *s, uint32_t idx, uint64_t c_ino)
{
	if (s->on && idx < s->n)
		s->v[idx].c_ino = c_ino;
}

static int cmp_ino(const void *a, const void *b, void *userdata)
{
	const SeenInode *v = userdata;
	uint64_t x = v[*(const uint32_t *)a].ino, y = v[*(const uint32_t *)b].ino;

	return x < y ? -1 : x > y;
}

/* Before the freeze: a changed inode is known changed already; an unchanged one gets its generation. */
static void compare_live(CloneSeen *s, SeenInode *e, const XfsInodeStat *x)
{
	int64_t ct = 0;

	if ((x->mode & S_IFMT) != (e->mode & S_IFMT) ||
	    !ts_ns(&(struct timespec){ .tv_sec = x->ctime_sec, .tv_nsec = x->ctime_nsec }, &ct) ||
	    (checking(s, CLONE_SEEN_CHECK_CTIME) && tick(s, ct) != tick(s, e->ctime_ns)))
		e->flags |= SEEN_CHANGED;
	else {
		e->gen = x->gen;
		e->flags |= SEEN_GEN;
	}
}

/* Frozen: whether @e changed since the live pass read it. Keeps what the counts need. */
static void compare_frozen(CloneSeen *s, SeenInode *e, const XfsInodeStat *x)
{
	int64_t ct = 0, at = 0;
	bool changed = (x->mode & S_IFMT) != (e->mode & S_IFMT) ||
		       !ts_ns(&(struct timespec){ .tv_sec = x->ctime_sec, .tv_nsec = x->ctime_nsec }, &ct) ||
		       !ts_ns(&(struct timespec){ .tv_sec = x->atime_sec, .tv_nsec = x->atime_nsec }, &at);

	if (checking(s, CLONE_SEEN_CHECK_CTIME) && tick(s, ct) != tick(s, e->ctime_ns))
		changed = true;
	if (checking(s, CLONE_SEEN_CHECK_GEN) && (!(e->flags & SEEN_GEN) || x->gen != e->gen))
		changed = true;
	if (checking(s, CLONE_SEEN_CHECK_ATIME) && at != e->atime_ns)
		changed = true;
	/* Hard links: every name is compared, wherever it is (clone-seen.h). */
	if (checking(s, CLONE_SEEN_CHECK_LINKS) && !(e->flags & SEEN_DIR) && (x->nlink != 1 || (e->flags & SEEN_LINKED)))
		changed = true;
	if (changed)
		e->flags |= SEEN_CHANGED;
	e->mode = x->mode;
	e->size = x->size;
}

/* Frozen: -ETIME past the budget, -ECANCELED once the program is stopping. */
static int budget_check(uint64_t deadline_us)
{
	if (freeze_aborted())
		return -ECANCELED;
	if (freeze_now_us() > deadline_us)
		return -ETIME;
	return 0;
}

/*
 * How many inodes the next call reads from our inode at @p: the stretch of
 * inode numbers up to the last of ours before a gap wider than an inode
 * chunk (64), at most a batch. Chunks of others' inodes between two of ours
 * (the clone's own, made meanwhile) are then never read: the call after
 * starts at our next inode.
 */
static uint32_t stretch(const CloneSeen *s, size_t p, uint32_t batch)
{
	uint64_t first = s->v[s->order[p]].ino, last = first;

	for (size_t q = p + 1; q < s->n; q++) {
		uint64_t ino = s->v[s->order[q]].ino;

		if (ino - last > 64 || ino - first >= batch)
			break;
		last = ino;
	}
	return (uint32_t)(last - first + 1);
}

/*
 * Bulk stats of every inode in s->order, in inode order. Each call starts at
 * the next inode of ours and reads one stretch (above). @frozen: compare,
 * within @deadline_us.
 */
/*
 * Test builds: NVMEVOL_TEST_CLONE_BULKSTAT_FAIL=live or =frozen makes the bulk
 * stats before or during the freeze fail as on a filesystem without them.
 */
static int test_bulkstat_fail(bool frozen)
{
#if defined(NVMEVOL_TEST_HOOKS) && NVMEVOL_TEST_HOOKS
	const char *e = getenv("NVMEVOL_TEST_CLONE_BULKSTAT_FAIL");

	if (e && streq(e, frozen ? "frozen" : "live"))
		return -ENOTTY;
#endif
	return 0;
}

static int sweep(CloneSeen *s, int fd, bool frozen, uint64_t deadline_us)
{
	_cleanup_(xfs_bulkstat_done) XfsBulkstat b = { 0 };
	size_t p = 0;
	int r = test_bulkstat_fail(frozen);

	if (r < 0 || s->n == 0)
		return r;
	r = xfs_bulkstat_init(&b, s->n < CLONE_SEEN_BATCH ? (uint32_t)s->n : CLONE_SEEN_BATCH);
	if (r < 0)
		return r;
	while (p < s->n) {
		uint64_t next = s->v[s->order[p]].ino;

		r = frozen ? budget_check(deadline_us) : 0;
		if (r < 0)
			return r;
		r = xfs_bulkstat_next(&b, fd, &next, stretch(s, p, b.cap));
		if (r < 0)
			return r;
		if (b.n == 0)
			break;
		for (uint32_t i = 0; i < b.n; i++) {
			XfsInodeStat x;

			xfs_bulkstat_get(&b, i, &x);
			s->checked++;
			/* Ours that the kernel skipped are gone. */
			for (; p < s->n && s->v[s->order[p]].ino < x.ino; p++)
				s->v[s->order[p]].flags |= SEEN_CHANGED;
			for (; p < s->n && s->v[s->order[p]].ino == x.ino; p++) {
				SeenInode *e = &s->v[s->order[p]];
				if (frozen)
					compare_frozen(s, e, &x);
				else
					compare_live(s, e, &x);
			}
		}
	}
	for (; p < s->n; p++)
		s->v[s->order[p]].flags |= SEEN_CHANGED;
	return 0;
}

int clone_seen_prepare(CloneSeen *s, int fd)
{
	int r;

	if (!s->on)
		return -ENOENT;
	s->order = malloc((s->n ? s->n : 1) * sizeof(*s->order));
	if (!s->order) {
		clone_seen_done(s);
		return -ENOMEM;
	}
	for (size_t i = 0; i < s->n; i++)
		s->order[i] = (uint32_t)i;
	if (s->n > 1)
		qsort_r(s->order, s->n, sizeof(*s->order), cmp_ino, s->v);
	r = sweep(s, fd, false, 0);
	if (r < 0)
		clone_seen_done(s);
	return r;
}

/* Enters @d and every directory above it. */
static void descend_to(CloneSeen *s, uint32_t d)
{
	for (; d != CLONE_SEEN_NONE && !(s->v[d].flags & SEEN_DESCEND); d = s->v[d].parent)
		s->v[d].flags |= SEEN_DESCEND;
}

int clone_seen_check(CloneSeen *s, int fd, uint64_t deadline_us)
{
	int r;

	if (!s->on)
		return -ENOENT;
	s->checked = s->changed = 0;
	/* A clock set back since the live pass began could stamp a later change with an earlier time. */
	if (checking(s, CLONE_SEEN_CHECK_RACY) &&
	    clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC) < s->clock_off_ns - 1000000) {
		clone_seen_done(s);
		return -ESTALE;
	}
	r = sweep(s, fd, true, deadline_us);
	if (r < 0) {
		if (r != -ETIME && r != -ECANCELED)
			clone_seen_done(s);
		return r;
	}
	for (size_t i = 0; i < s->n; i++) {
		SeenInode *e = &s->v[i];

		if (e->flags & SEEN_CHANGED) {
			s->changed++;
			descend_to(s, (e->flags & SEEN_DIR) ? (uint32_t)i : e->parent);
		} else if ((e->flags & SEEN_HOLDS) && checking(s, CLONE_SEEN_CHECK_LINKS))
			descend_to(s, (uint32_t)i);
	}
	return 0;
}

uint32_t clone_seen_find(const CloneSeen *s, uint64_t ino)
{
	size_t lo = 0, hi = s->order ? s->n : 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint64_t m = s->v[s->order[mid]].ino;

		if (m == ino)
			return s->order[mid];
		if (m < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	return CLONE_SEEN_NONE;
}

bool clone_seen_unchanged(const CloneSeen *s, uint64_t ino, uint64_t *ret_c_ino)
{
	uint32_t idx = s->on ? clone_seen_find(s, ino) : CLONE_SEEN_NONE;
	uint16_t f;

	if (idx == CLONE_SEEN_NONE || s->v[idx].c_ino == 0)
		return false;
	f = s->v[idx].flags;
	if (ret_c_ino)
		*ret_c_ino = s->v[idx].c_ino;
	return !(f & SEEN_CHANGED) && !((f & SEEN_DIR) && (f & SEEN_DESCEND));
}

bool clone_seen_dir_changed(const CloneSeen *s, uint32_t idx)
{
	return !s->on || idx >= s->n || (s->v[idx].flags & SEEN_CHANGED);
}

bool clone_seen_is_copy(const CloneSeen *s, uint64_t s_ino, uint64_t c_ino)
{
	uint32_t idx = s->on ? clone_seen_find(s, s_ino) : CLONE_SEEN_NONE;

	return idx != CLONE_SEEN_NONE && c_ino != 0 && s->v[idx].c_ino == c_ino;
}

void clone_seen_visited(CloneSeen *s, uint32_t idx)
{
	if (s->on && idx < s->n)
		s->v[idx].flags |= SEEN_VISITED;
}

void clone_seen_count_unvisited(const CloneSeen *s, SeenCounts *ret)
{
	*ret = (SeenCounts){ 0 };
	if (!s->on)
		return;
	for (size_t i = 0; i < s->n; i++) {
		const SeenInode *e = &s->v[i];

		if (e->flags & (SEEN_CHANGED | SEEN_VISITED | SEEN_ROOT))
			continue;
		switch (e->mode & S_IFMT) {
		case S_IFDIR:
			ret->dirs++;
			break;
		case S_IFREG:
			ret->files++;
			ret->bytes += e->size;
			break;
		case S_IFLNK:
			ret->symlinks++;
			break;
		default:
			ret->specials++;
		}
	}
}
