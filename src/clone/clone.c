/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clone/clone.h"
#include "clone/clone-file.h"
#include "clone/clone-meta.h"
#include "clone/clone-plan.h"
#include "clone/clone-seen.h"
#include "clone/freeze.h"
#include "util/dircursor.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/io-util.h"
#include "util/alloc-util.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/u64map.h"

/* Tests only; set while no clone runs (see clone.h), so they need no lock. */
static CloneBeforeFreezeHook before_freeze_hook;
static void *before_freeze_userdata;
static CloneAfterReadHook after_read_hook;
static void *after_read_userdata;

void clone_set_before_freeze_hook(CloneBeforeFreezeHook hook, void *userdata)
{
	before_freeze_hook = hook;
	before_freeze_userdata = userdata;
}

void clone_set_after_read_hook(CloneAfterReadHook hook, void *userdata)
{
	after_read_hook = hook;
	after_read_userdata = userdata;
}

typedef enum WalkMode {
	WALK_LIVE,    /* make the clone match the source now, while it may change */
	WALK_CAPTURE, /* frozen: read both trees, record what the clone still needs */
	WALK_MEASURE, /* the source only: allocated bytes and inodes */
} WalkMode;

/* One directory's names, sorted: offsets into one arena, with the inode each names (d_ino). */
typedef struct ListingEntry {
	size_t off;
	uint64_t ino;
} ListingEntry;

typedef struct Listing {
	char *arena;
	ListingEntry *ents;
	size_t n, len;
} Listing;

typedef struct Frame {
	Listing ls;
	size_t i;
	char *name;      /* in the parent directory; NULL for the root */
	size_t path_len; /* length of Walk.path before this directory was appended */
	bool c_present;  /* the clone has this directory and its cursor is in it */
	bool c_fresh;    /* made in this pass: empty, nothing to compare */
	bool dirty;      /* capture: the clone's entries here change, so its times must be set again */
	bool pruned;     /* capture: the clone's directory is the live pass's copy of this one: unchanged entries stay */
	bool s_changed;  /* capture: the source directory's names or metadata may differ from the clone's */
	uint32_t seen;   /* the source directory in the ledger (clone-seen.h), CLONE_SEEN_NONE if not there */
	Listing cls;     /* capture, pruned and changed: the clone's names and inodes here */
	uint64_t mem;    /* charged to Walk.mem_names for this frame */
} Frame;

typedef struct LinkInfo {
	uint64_t c_ino; /* the clone's inode for it, 0 if it is (re)created by the plan */
	char *c_path;   /* its first name, from the clone's root */
	uint32_t seen;  /* live: its index in the ledger */
} LinkInfo;

typedef struct Walk {
	WalkMode mode;
	const CloneParams *p;
	CloneStats *st;
	DirCursor s, c;
	Frame *frames;
	size_t depth, cap;
	size_t entered; /* capture: frames [0, entered) have had their ENTER emitted */
	char *path;     /* of the current directory, from the root: "a/b" */
	size_t path_len, path_cap;
	U64Map links;   /* source inode (hard-linked) -> index in linkv */
	LinkInfo *linkv;
	size_t n_links, cap_links;
	U64Map claims;  /* clone inode -> the source inode it stands for */
	ClonePlan *plan;
	CloneSeen *seen; /* live: what it reads is noted; capture: what did not change is left alone (NULL: none) */
	uint32_t entry_seen; /* the entry being handled, in the ledger */
	uint64_t entry_ino;  /* live: its inode as the first stat saw it */
	uint64_t deadline_us;
	bool *reflink;  /* still sharing blocks (cleared when copying is allowed and sharing is not) */
	bool tolerant;  /* a frozen pass follows: entries that change under this one are skipped */
	bool verify;    /* capture of a copy: any change of the source fails, nothing is carried over */
	char *changed;  /* verify: the first path found changed */
	uint64_t mem_max, mem_names, mem_links; /* clone.h: the walk's memory the source's shape decides */
	uint64_t examined, skipped; /* capture: entries compared, entries left alone (unchanged) */
	uint64_t measure_bytes, measure_inodes;
	char **reterr_msg;
} Walk;

static char *entry_path(Walk *w, const char *name);

/* Entry names come from the source (any user): printable and bounded in messages. */
static void printable(const char *in, char *out, size_t size)
{
	size_t i = 0;

	for (; *in && i + 4 < size; in++)
		out[i++] = (unsigned char)*in >= 0x20 && (unsigned char)*in < 0x7f ? *in : '?';
	if (*in && size > 4) {
		memcpy(out + i, "...", 3);
		i += 3;
	}
	out[i] = '\0';
}

static int fail(Walk *w, int r, const char *what, const char *name)
{
	char path[256], leaf[128];
	const char *sep;

	printable(w->path ? w->path : "", path, sizeof(path));
	printable(name ? name : "", leaf, sizeof(leaf));
	sep = path[0] && leaf[0] ? "/" : "";
	if (r == -ENOBUFS)
		return errmsg_set(w->reterr_msg, r,
				  "walking the source needs more than its memory limit of %.1f MiB at '%s%s%s' (%.1f MiB "
				  "for the names in the %zu directories being walked, %.1f MiB for the paths of %zu "
				  "hard-linked files): it has too many hard links, or too deep a tree of long names",
				  w->mem_max / 1048576.0, path, sep, leaf, w->mem_names / 1048576.0, w->depth,
				  w->mem_links / 1048576.0, w->n_links);
	if (r == -EAGAIN)
		return errmsg_set(w->reterr_msg, r,
				  "another process holds a write lease (F_SETLEASE, e.g. Samba or an NFS server) on '%s%s%s' "
				  "and did not give it up within %u ms",
				  path, sep, leaf, CLONE_LEASE_WAIT_MS);
	errno = -r;
	return errmsg_set(w->reterr_msg, r, "%s '%s%s%s': %m", what, path, sep, leaf);
}

/* Charges @bytes to @counter (a part of the walk's memory, clone.h). -ENOBUFS past the limit. */
static int mem_charge(Walk *w, uint64_t *counter, uint64_t bytes)
{
	*counter += bytes;
	if (w->mem_names + w->mem_links > w->mem_max) {
		*counter -= bytes;
		return -ENOBUFS;
	}
	return 0;
}

/* Verify: the source changed since it was copied. The message is made once the walk ends. */
static int copy_changed(Walk *w, const char *name)
{
	if (!w->changed)
		w->changed = entry_path(w, name ? name : "");
	return -EBUSY;
}

/* ---- listings and paths ---- */

static int cmp_names(const void *a, const void *b, void *arena)
{
	return strcmp((const char *)arena + ((const ListingEntry *)a)->off, (const char *)arena + ((const ListingEntry *)b)->off);
}

static void listing_done(Listing *l)
{
	free(l->arena);
	free(l->ents);
	*l = (Listing){ 0 };
}

typedef struct ListingBuild {
	Listing l;
	size_t cap_a, cap_o;
	uint64_t room; /* bytes the listing may take */
} ListingBuild;

static uint64_t listing_bytes(const Listing *l)
{
	return l->len + l->n * sizeof(*l->ents);
}

static int listing_add(const char *name, uint64_t ino, void *userdata)
{
	ListingBuild *b = userdata;
	size_t nl = strlen(name) + 1;

	if (b->l.n >= CLONE_DIR_ENTRIES_MAX)
		return -EFBIG;
	if (listing_bytes(&b->l) + nl + sizeof(*b->l.ents) > b->room)
		return -ENOBUFS;
	if (GROW_ARRAY(b->l.arena, b->cap_a, b->l.len + nl, 4096) < 0 || GROW_ARRAY(b->l.ents, b->cap_o, b->l.n + 1, 64) < 0)
		return -ENOMEM;
	memcpy(b->l.arena + b->l.len, name, nl);
	b->l.ents[b->l.n++] = (ListingEntry){ .off = b->l.len, .ino = ino };
	b->l.len += nl;
	return 0;
}

static int listing_read(int dirfd, uint64_t room, Listing *ret)
{
	ListingBuild b = { .room = room };
	int r = dir_foreach_entry(dirfd, listing_add, &b);

	if (r < 0) {
		listing_done(&b.l);
		return r;
	}
	if (b.l.n > 1)
		qsort_r(b.l.ents, b.l.n, sizeof(*b.l.ents), cmp_names, b.l.arena);
	*ret = b.l;
	return 0;
}

static const char *listing_name(const Listing *l, size_t i)
{
	return l->arena + l->ents[i].off;
}

/* The index of @name in @l, or l->n. */
static size_t listing_find(const Listing *l, const char *name)
{
	size_t lo = 0, hi = l->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(listing_name(l, mid), name);
		if (c == 0)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return l->n;
}

static bool listing_has(const Listing *l, const char *name)
{
	return listing_find(l, name) < l->n;
}

static int path_append(Walk *w, const char *name)
{
	size_t nl = strlen(name), need = w->path_len + 1 + nl + 1;

	if (GROW_ARRAY(w->path, w->path_cap, need, 256) < 0)
		return -ENOMEM;
	if (w->path_len > 0)
		w->path[w->path_len++] = '/';
	memcpy(w->path + w->path_len, name, nl + 1);
	w->path_len += nl;
	return 0;
}

static void path_truncate(Walk *w, size_t len)
{
	w->path_len = len;
	if (w->path)
		w->path[len] = '\0';
}

/* "dir/name" of an entry of the current directory, malloc'd. */
static char *entry_path(Walk *w, const char *name)
{
	char *s = NULL;

	if (asprintf(&s, "%s%s%s", w->path_len ? w->path : "", w->path_len ? "/" : "", name) < 0)
		return NULL;
	return s;
}

/* ---- plan emission (capture) ---- */

static int emit(Walk *w, ClonePlanOpType type, const char *name, const char *target, CloneMeta *meta)
{
	int r;

	if (w->verify && type != CLONE_PLAN_META)
		return copy_changed(w, name);
	/* ENTERs are emitted lazily: a directory without changes costs nothing in the plan. */
	for (; w->entered < w->depth; w->entered++) {
		r = clone_plan_add(w->plan, CLONE_PLAN_ENTER, w->frames[w->entered].name, NULL, NULL);
		if (r < 0)
			return r;
	}
	return clone_plan_add(w->plan, type, name, target, meta);
}

static int emit_range(Walk *w, ClonePlanOpType type, const char *name, uint64_t off, uint64_t len, size_t data_off)
{
	ClonePlanOp *op;
	int r = emit(w, type, name, NULL, NULL);

	if (r < 0)
		return r;
	op = clone_plan_last(w->plan);
	op->offset = off;
	op->length = len;
	op->data_off = data_off;
	return 0;
}

/* ---- the source's files: only regular files are ever opened ---- */

/*
 * Opens a regular file of the source for reading: O_PATH first (opens
 * nothing), check the type on that descriptor, then reopen it through
 * /proc/self/fd, so a name swapped for a device node in between is never
 * opened. -EBADFD if it is not a regular file.
 */
static int open_source_file(int dirfd, const char *name, struct stat *ret_st)
{
	_cleanup_close_ int pfd = -EBADF;
	char proc[64];
	int fd;

	pfd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0)
		return negative_errno();
	if (fstat(pfd, ret_st) < 0)
		return negative_errno();
	if (!S_ISREG(ret_st->st_mode))
		return -EBADFD;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
	/* O_NONBLOCK: a file under a write lease answers EWOULDBLOCK instead of waiting for the lease's break. */
	fd = open(proc, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return negative_errno();
	return fd;
}

/*
 * The same while frozen: nothing can rename, replace or unlink anything (it
 * would wait for the thaw), so the type just read by stat still holds and the
 * file is opened directly, without the detour through /proc.
 */
static int open_frozen_file(int dirfd, const char *name, struct stat *ret_st)
{
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

	if (fd < 0)
		return negative_errno();
	if (fstat(fd, ret_st) < 0) {
		int r = negative_errno();
		(void)close(fd);
		return r;
	}
	if (!S_ISREG(ret_st->st_mode)) {
		(void)close(fd);
		return -EBADFD;
	}
	return fd;
}

/*
 * The live pass's open of a source file. Under another process's write lease
 * the first try asks the kernel to break it (the holder is signalled): wait a
 * little for the holder, never the kernel's lease-break-time. The frozen pass
 * does not wait (the budget runs): it tries once and counts it as changed.
 */
static int open_live_file(int dirfd, const char *name, struct stat *ret_st)
{
	for (unsigned waited = 0;; waited += 10) {
		int fd = open_source_file(dirfd, name, ret_st);

		if (fd != -EAGAIN || waited >= CLONE_LEASE_WAIT_MS)
			return fd;
		(void)usleep(10000);
	}
}

static bool vanished(int r)
{
	return r == -ENOENT || r == -EBADFD || r == -ENOTDIR || r == -ELOOP || r == -ESTALE;
}

/* ---- hard links ---- */

static int link_remember(Walk *w, uint64_t s_ino, uint64_t c_ino, const char *name)
{
	LinkInfo li = { .c_ino = c_ino, .seen = w->entry_seen };
	int r;

	if (GROW_ARRAY(w->linkv, w->cap_links, w->n_links + 1, 64) < 0)
		return -ENOMEM;
	if (w->mode != WALK_MEASURE && !(li.c_path = entry_path(w, name)))
		return -ENOMEM;
	/* Its entry, two map slots, its path. */
	r = mem_charge(w, &w->mem_links, sizeof(li) + 2 * 16 + (li.c_path ? strlen(li.c_path) + 1 : 0));
	if (r < 0) {
		free(li.c_path);
		return fail(w, r, NULL, name);
	}
	r = u64map_put(&w->links, s_ino, w->n_links);
	if (r == 0 && c_ino)
		r = u64map_put(&w->claims, c_ino, s_ino);
	if (r < 0) {
		free(li.c_path);
		return r;
	}
	w->linkv[w->n_links++] = li;
	return 0;
}

/* ---- changes to the clone: done now (live) or recorded (capture) ---- */

static int remove_c(Walk *w, Frame *f, const char *name)
{
	int r;

	f->dirty = true;
	if (w->mode == WALK_CAPTURE)
		return emit(w, CLONE_PLAN_REMOVE, name, NULL, NULL);
	r = rm_rf_at(dircursor_fd(&w->c), name);
	return r < 0 ? fail(w, r, "cannot remove from the clone", name) : 0;
}

/*
 * Source metadata of an entry (@name NULL: the current directory, by its
 * descriptors); the clone's is compared unless @force (the clone's entry is
 * new or its content changed). Applied now or recorded.
 */
static int sync_meta(Walk *w, const char *name, int s_fd, const struct stat *ss, int c_fd, bool force)
{
	CloneMeta sm = { 0 }, cm = { 0 };
	int sdir = dircursor_fd(&w->s), cdir = dircursor_fd(&w->c);
	int r;

	r = clone_meta_read(sdir, name, s_fd, ss, &sm);
	if (r < 0)
		return fail(w, r, "cannot read the attributes of", name);
	/* What the clone gets of the access time: a read of the source after this changes no change time. */
	if (w->mode == WALK_LIVE && w->seen)
		clone_seen_atime(w->seen, name ? w->entry_seen : w->frames[w->depth - 1].seen, &sm.atime);
	if (!force) {
		struct stat cs;

		if ((c_fd >= 0 ? fstat(c_fd, &cs) : fstatat(cdir, name, &cs, AT_SYMLINK_NOFOLLOW)) < 0)
			r = negative_errno();
		if (r == 0)
			r = clone_meta_read(cdir, name, c_fd, &cs, &cm);
		if (r < 0) {
			clone_meta_done(&sm);
			return fail(w, r, "cannot read the clone's attributes of", name);
		}
		force = !clone_meta_equal(&sm, &cm);
		clone_meta_done(&cm);
	}
	if (force) {
		if (w->mode == WALK_CAPTURE)
			r = emit(w, CLONE_PLAN_META, name, NULL, &sm);
		else {
			r = clone_meta_apply(cdir, name, c_fd, &sm);
			if (r < 0)
				r = fail(w, r, "cannot set the attributes of the clone's", name);
		}
	}
	clone_meta_done(&sm);
	return r;
}

typedef struct CaptureCtx {
	Walk *w;
	int src;
	const char *name;
	bool changed;
} CaptureCtx;

/* Frozen: -ETIME past the budget, -ECANCELED once the program is stopping (its freeze is thawed already). */
static int capture_check(const Walk *w)
{
	if (freeze_aborted())
		return -ECANCELED;
	if (freeze_now_us() > w->deadline_us)
		return -ETIME;
	return 0;
}

static int capture_range(void *userdata, uint64_t off, uint64_t len, bool hole)
{
	CaptureCtx *x = userdata;
	size_t data_off = 0;
	int r;

	x->changed = true;
	r = capture_check(x->w);
	if (r < 0)
		return r;
	if (hole)
		return emit_range(x->w, CLONE_PLAN_PUNCH, x->name, off, len, 0);
	if (len > SIZE_MAX)
		return -E2BIG;
	r = clone_plan_reserve(x->w->plan, (size_t)len, &data_off);
	if (r < 0)
		return r;
	/* In chunks: one range may be as large as the plan (256 MiB), and the budget holds inside it too. */
	for (uint64_t done = 0; done < len; done += CLONE_CAPTURE_CHUNK) {
		uint64_t n = len - done < CLONE_CAPTURE_CHUNK ? len - done : CLONE_CAPTURE_CHUNK;

		r = done > 0 ? capture_check(x->w) : 0;
		if (r == 0)
			r = pread_all(x->src, x->w->plan->data + data_off + done, (size_t)n, off + done);
		if (r < 0)
			return r;
	}
	x->w->st->delta_bytes += len;
	return emit_range(x->w, CLONE_PLAN_WRITE, x->name, off, len, data_off);
}

static int any_difference(void *userdata, uint64_t off, uint64_t len, bool hole)
{
	*(bool *)userdata = true;
	return -ECANCELED; /* one is enough */
}

static int share_or_copy(Walk *w, int src, int dst, const char *name)
{
	int r;

	if (*w->reflink) {
		r = clone_file_reflink(src, dst);
		if (r == 0) {
			w->st->reflinked++;
			return 0;
		}
		if (r != -EOPNOTSUPP)
			return fail(w, r, "cannot clone", name);
		if (!w->p->allow_copy)
			return fail(w, r, "cannot share the blocks of", name);
		*w->reflink = false;
	}
	r = clone_file_copy(src, dst);
	if (r < 0)
		return fail(w, r, "cannot copy", name);
	w->st->copied++;
	return 0;
}

/* A regular file. *ret_c_ino: the clone's inode, 0 if the plan makes a new one. 1: skipped (tolerant). */
static int do_file(Walk *w, Frame *f, const char *name, bool c_exists, const struct stat *cs, uint64_t *ret_c_ino)
{
	_cleanup_close_ int src = -EBADF, dst = -EBADF;
	int cdir = dircursor_fd(&w->c);
	struct stat ss, dst_st;
	bool changed = false;
	int r;

	src = w->mode == WALK_CAPTURE ? open_frozen_file(dircursor_fd(&w->s), name, &ss)
				      : open_live_file(dircursor_fd(&w->s), name, &ss);
	if (src < 0) {
		/* A leased file is left to the frozen pass, which tries it again. */
		if (w->tolerant && (vanished(src) || src == -EAGAIN))
			return 1;
		return fail(w, src, "cannot open", name);
	}
	w->st->files++;
	w->st->bytes += (uint64_t)ss.st_size;
	*ret_c_ino = 0;
	/* Replaced since its stat: what is read is not what the ledger noted. */
	if (w->mode == WALK_LIVE && w->seen && (uint64_t)ss.st_ino != w->entry_ino) {
		clone_seen_changed(w->seen, w->entry_seen);
		clone_seen_changed(w->seen, f->seen);
	}

	if (w->verify) {
		/* A copy: its size and modification time were the source's when it was copied. */
		if (!c_exists || ss.st_size != cs->st_size || ss.st_mtim.tv_sec != cs->st_mtim.tv_sec ||
		    ss.st_mtim.tv_nsec != cs->st_mtim.tv_nsec)
			return copy_changed(w, name);
		*ret_c_ino = cs->st_ino;
		return sync_meta(w, name, src, &ss, -EBADF, false);
	}
	if (w->mode == WALK_CAPTURE) {
		CaptureCtx x = { .w = w, .src = src, .name = name };

		if (c_exists) {
			dst = openat(cdir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
			if (dst < 0)
				return fail(w, negative_errno(), "cannot open the clone's", name);
			r = clone_file_diff(src, (uint64_t)ss.st_size, dst, capture_range, &x);
			if (r == 0 && ss.st_size != cs->st_size) {
				x.changed = true;
				r = emit_range(w, CLONE_PLAN_SIZE, name, 0, (uint64_t)ss.st_size, 0);
			}
			*ret_c_ino = cs->st_ino;
		} else {
			r = emit(w, CLONE_PLAN_CREATE, name, NULL, NULL);
			/* Every written extent; holes and unwritten preallocation stay holes. */
			if (r == 0)
				r = clone_file_diff(src, (uint64_t)ss.st_size, -EBADF, capture_range, &x);
			if (r == 0)
				r = emit_range(w, CLONE_PLAN_SIZE, name, 0, (uint64_t)ss.st_size, 0);
			x.changed = true;
			f->dirty = true;
		}
		if (r == -E2BIG || r == -ETIME || r == -ECANCELED)
			return r; /* more than the plan may hold (the caller retries), past the budget, or stopping */
		if (r < 0)
			return fail(w, r, "cannot compare", name);
		return sync_meta(w, name, src, &ss, dst, x.changed);
	}

	if (c_exists) {
		dst = openat(cdir, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
		if (dst < 0)
			return fail(w, negative_errno(), "cannot open the clone's", name);
		changed = ss.st_size != cs->st_size;
		/* A copy shares no blocks to compare: it changed when the source was written since. */
		if (!*w->reflink)
			changed = changed || ss.st_mtim.tv_sec != cs->st_mtim.tv_sec || ss.st_mtim.tv_nsec != cs->st_mtim.tv_nsec;
		else if (!changed) {
			r = clone_file_diff(src, (uint64_t)ss.st_size, dst, any_difference, &changed);
			if (r < 0 && r != -ECANCELED)
				return fail(w, r, "cannot compare", name);
		}
	} else {
		dst = openat(cdir, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (dst < 0)
			return fail(w, negative_errno(), "cannot create the clone's", name);
		changed = true;
	}
	if (changed) {
		r = share_or_copy(w, src, dst, name);
		if (r < 0)
			return r;
	}
	if (fstat(dst, &dst_st) < 0)
		return fail(w, negative_errno(), "cannot stat the clone's", name);
	*ret_c_ino = dst_st.st_ino;
	/* Times are set after the content: writing moved them. */
	return sync_meta(w, name, src, &ss, dst, changed);
}

static int do_symlink(Walk *w, Frame *f, const char *name, const struct stat *ss, bool c_exists)
{
	char target[PATH_MAX + 1], have[PATH_MAX + 1];
	ssize_t n, m;
	int r;

	n = readlinkat(dircursor_fd(&w->s), name, target, sizeof(target) - 1);
	if (n < 0) {
		if (w->tolerant && vanished(negative_errno()))
			return 1;
		return fail(w, negative_errno(), "cannot read the symlink", name);
	}
	target[n] = '\0';
	w->st->symlinks++;
	if (c_exists) {
		m = readlinkat(dircursor_fd(&w->c), name, have, sizeof(have) - 1);
		if (m == n && memcmp(have, target, (size_t)n) == 0)
			return sync_meta(w, name, -EBADF, ss, -EBADF, false);
		r = remove_c(w, f, name);
		if (r < 0)
			return r;
	}
	f->dirty = true;
	if (w->mode == WALK_CAPTURE)
		r = emit(w, CLONE_PLAN_SYMLINK, name, target, NULL);
	else if (symlinkat(target, dircursor_fd(&w->c), name) < 0)
		r = fail(w, negative_errno(), "cannot create the clone's symlink", name);
	else
		r = 0;
	if (r < 0)
		return r;
	return sync_meta(w, name, -EBADF, ss, -EBADF, true);
}

/* FIFOs, sockets, character and block devices: recreated, never opened. */
static int do_special(Walk *w, Frame *f, const char *name, const struct stat *ss, bool c_exists)
{
	ClonePlanOp *op;
	int r;

	w->st->specials++;
	if (c_exists)
		return sync_meta(w, name, -EBADF, ss, -EBADF, false);
	f->dirty = true;
	if (w->mode == WALK_CAPTURE) {
		r = emit(w, CLONE_PLAN_MKNOD, name, NULL, NULL);
		if (r < 0)
			return r;
		op = clone_plan_last(w->plan);
		op->mode = ss->st_mode;
		op->rdev = ss->st_rdev;
	} else if (mknodat(dircursor_fd(&w->c), name, (ss->st_mode & S_IFMT) | 0600, ss->st_rdev) < 0)
		return fail(w, negative_errno(), "cannot create the clone's special file", name);
	return sync_meta(w, name, -EBADF, ss, -EBADF, true);
}

/* Whether the clone's entry can stay and be compared, or must be replaced. */
static bool same_kind(Walk *w, const struct stat *ss, const struct stat *cs)
{
	uint64_t owner;

	if ((ss->st_mode & S_IFMT) != (cs->st_mode & S_IFMT))
		return false;
	if (S_ISDIR(ss->st_mode))
		return true;
	if ((S_ISCHR(ss->st_mode) || S_ISBLK(ss->st_mode)) && ss->st_rdev != cs->st_rdev)
		return false;
	/* Link structure: a single name must be a single name; a shared inode must stand for this one. */
	if (ss->st_nlink == 1)
		return cs->st_nlink == 1;
	return !u64map_get(&w->claims, cs->st_ino, &owner) || owner == ss->st_ino;
}

/* A second or later name of a hard-linked inode: link it to the first. 1 = handled. */
static int do_extra_link(Walk *w, Frame *f, const char *name, const struct stat *ss, bool c_exists,
			 const struct stat *cs)
{
	_cleanup_close_ int pfd = -EBADF;
	const char *leaf;
	uint64_t idx;
	LinkInfo *li;
	int r;

	if (!u64map_get(&w->links, ss->st_ino, &idx))
		return 0;
	li = &w->linkv[idx];
	w->st->hardlinks++;
	if (w->mode == WALK_MEASURE)
		return 1;
	if (c_exists && li->c_ino && cs->st_ino == li->c_ino)
		return 1;
	if (c_exists) {
		r = remove_c(w, f, name);
		if (r < 0)
			return r;
	}
	f->dirty = true;
	if (w->mode == WALK_CAPTURE) {
		r = emit(w, CLONE_PLAN_LINK, name, li->c_path, NULL);
		return r < 0 ? r : 1;
	}
	r = clone_plan_open_parent(w->p->dst_fd, li->c_path, &pfd, &leaf);
	if (r == 0 && linkat(pfd, leaf, dircursor_fd(&w->c), name, 0) < 0)
		r = negative_errno();
	return r < 0 ? fail(w, r, "cannot link the clone's", name) : 1;
}

static int frame_push(Walk *w, const char *name, bool c_present, bool c_fresh)
{
	Frame fr = { .c_present = c_present, .c_fresh = c_fresh, .path_len = w->path_len, .seen = w->entry_seen,
		     .s_changed = true };
	uint64_t used = w->mem_names + w->mem_links;
	bool charged = false;
	int r;

	/* Capture: where the clone's directory is the live pass's copy of this one, only what changed is compared. */
	if (w->mode == WALK_CAPTURE && w->seen && fr.seen != CLONE_SEEN_NONE && c_present && !c_fresh &&
	    clone_seen_is_copy(w->seen, w->s.levels[w->s.depth - 1].ino, w->c.levels[w->c.depth - 1].ino)) {
		fr.pruned = true;
		fr.s_changed = clone_seen_dir_changed(w->seen, fr.seen);
	}

	if (GROW_ARRAY(w->frames, w->cap, w->depth + 1, 64) < 0)
		return -ENOMEM;
	if (name) {
		fr.name = strdup(name);
		if (!fr.name)
			return -ENOMEM;
	}
	r = listing_read(dircursor_fd(&w->s), used < w->mem_max ? w->mem_max - used : 0, &fr.ls);
	/* The clone's names, to find each unchanged inode's copy under its name (handle_one()). */
	if (r == 0 && fr.pruned && fr.s_changed) {
		used += listing_bytes(&fr.ls);
		r = listing_read(dircursor_fd(&w->c), used < w->mem_max ? w->mem_max - used : 0, &fr.cls);
	}
	/* The listings, the frame, its name twice (the frame's and the path's). */
	fr.mem = listing_bytes(&fr.ls) + listing_bytes(&fr.cls) + sizeof(fr) + (name ? 2 * (strlen(name) + 1) : 0);
	if (r == 0)
		r = mem_charge(w, &w->mem_names, fr.mem);
	charged = r == 0;
	if (r == 0 && name)
		r = path_append(w, name);
	if (r < 0) {
		if (charged)
			w->mem_names -= fr.mem;
		free(fr.name);
		listing_done(&fr.ls);
		listing_done(&fr.cls);
		return r;
	}
	w->frames[w->depth++] = fr;
	return 0;
}

static int do_dir(Walk *w, Frame *f, const char *name, bool c_exists)
{
	bool c_present = true, c_fresh = f->c_fresh;
	int r;

	w->st->dirs++;
	if (w->mode == WALK_MEASURE)
		w->measure_inodes++;
	else if (!c_exists) {
		f->dirty = true;
		if (w->mode == WALK_CAPTURE) {
			r = emit(w, CLONE_PLAN_MKDIR, name, NULL, NULL);
			if (r < 0)
				return r;
			c_present = false;
		} else {
			if (mkdirat(dircursor_fd(&w->c), name, 0700) < 0)
				return fail(w, negative_errno(), "cannot create the clone's directory", name);
			c_fresh = true;
		}
	}
	r = dircursor_push(&w->s, name);
	if (r < 0) {
		if (w->tolerant && vanished(r)) {
			/* Never listed: the frozen pass compares it and its directory. */
			clone_seen_changed(w->seen, w->entry_seen);
			clone_seen_changed(w->seen, f->seen);
			return 0;
		}
		return fail(w, r, r == -EXDEV ? "a mount point inside the source at" : "cannot enter", name);
	}
	if (w->mode != WALK_MEASURE && c_present) {
		r = dircursor_push(&w->c, name);
		if (r < 0) {
			(void)dircursor_pop(&w->s);
			return fail(w, r, "cannot enter the clone's", name);
		}
		if (w->mode == WALK_LIVE && w->seen)
			clone_seen_clone_ino(w->seen, w->entry_seen, w->c.levels[w->c.depth - 1].ino);
	}
	r = frame_push(w, name, w->mode != WALK_MEASURE && c_present, c_fresh);
	if (r < 0) {
		if (w->mode != WALK_MEASURE && c_present)
			(void)dircursor_pop(&w->c);
		(void)dircursor_pop(&w->s);
		return fail(w, r, "cannot list", name);
	}
	return 0;
}

/* Live: notes the inode of @ss, about to be read, in the ledger (w->entry_seen). */
static void note_live(Walk *w, Frame *f, const struct stat *ss)
{
	uint64_t idx;

	w->entry_ino = ss->st_ino;
	/* A later name of a hard-linked inode: the frozen pass enters this directory too, and compares it. */
	if (!S_ISDIR(ss->st_mode) && ss->st_nlink > 1 && u64map_get(&w->links, ss->st_ino, &idx)) {
		w->entry_seen = w->linkv[idx].seen;
		clone_seen_holds_link(w->seen, f->seen);
		return;
	}
	w->entry_seen = clone_seen_add(w->seen, ss, f->seen);
}

static int handle_one(Walk *w, Frame *f, const char *name, uint64_t d_ino)
{
	struct stat ss, cs = { 0 };
	bool c_exists = false;
	uint64_t c_ino = 0;
	int r;

	if (w->mode == WALK_CAPTURE) {
		r = capture_check(w);
		if (r < 0)
			return r;
		/*
		 * Unchanged since the live pass read it and nothing below it changed; the clone's copy of it is
		 * under this name (in a directory whose names changed, a name may have been exchanged).
		 */
		uint64_t copy_ino = 0;
		size_t ci;

		if (f->pruned && clone_seen_unchanged(w->seen, d_ino, &copy_ino) &&
		    (!f->s_changed || !(w->seen->checks & CLONE_SEEN_CHECK_NAMES) ||
		     ((ci = listing_find(&f->cls, name)) < f->cls.n && f->cls.ents[ci].ino == copy_ino))) {
			w->skipped++;
			return 0;
		}
	}
	w->examined++;
	w->entry_seen = CLONE_SEEN_NONE;
	r = dircursor_stat(&w->s, name, &ss);
	if (r == -EXDEV)
		return fail(w, r, "a mount point inside the source at", name);
	if (r < 0) {
		if (!(w->tolerant && r == -ENOENT))
			return fail(w, r, "cannot stat", name);
		if (w->seen)
			clone_seen_changed(w->seen, f->seen);
		/* Gone from the source since it was listed: gone from the clone too. */
		if (f->c_present && !f->c_fresh && fstatat(dircursor_fd(&w->c), name, &cs, AT_SYMLINK_NOFOLLOW) == 0)
			return remove_c(w, f, name);
		return 0;
	}

	if (w->seen && w->mode == WALK_LIVE)
		note_live(w, f, &ss);
	else if (w->seen && w->mode == WALK_CAPTURE) {
		/* Counted here, so not among the unvisited (clone_seen_count_unvisited()). */
		w->entry_seen = clone_seen_find(w->seen, ss.st_ino);
		clone_seen_visited(w->seen, w->entry_seen);
	}

	if (w->mode == WALK_MEASURE) {
		if (S_ISDIR(ss.st_mode))
			return do_dir(w, f, name, false);
		if (ss.st_nlink > 1) {
			if (u64map_get(&w->links, ss.st_ino, NULL))
				return 0;
			r = link_remember(w, ss.st_ino, 0, name);
			if (r < 0)
				return r;
		}
		w->measure_bytes += (uint64_t)ss.st_blocks * 512u;
		w->measure_inodes++;
		return 0;
	}

	if (f->c_present && !f->c_fresh) {
		if (fstatat(dircursor_fd(&w->c), name, &cs, AT_SYMLINK_NOFOLLOW) == 0)
			c_exists = true;
		else if (errno != ENOENT)
			return fail(w, negative_errno(), "cannot stat the clone's", name);
	}
	if (!S_ISDIR(ss.st_mode) && ss.st_nlink > 1) {
		r = do_extra_link(w, f, name, &ss, c_exists, &cs);
		if (r != 0)
			return r < 0 ? r : 0;
	}
	if (c_exists && !same_kind(w, &ss, &cs)) {
		r = remove_c(w, f, name);
		if (r < 0)
			return r;
		c_exists = false;
	}

	switch (ss.st_mode & S_IFMT) {
	case S_IFDIR:
		return do_dir(w, f, name, c_exists);
	case S_IFREG:
		r = do_file(w, f, name, c_exists, &cs, &c_ino);
		break;
	case S_IFLNK:
		r = do_symlink(w, f, name, &ss, c_exists);
		break;
	case S_IFIFO:
	case S_IFSOCK:
	case S_IFCHR:
	case S_IFBLK:
		r = do_special(w, f, name, &ss, c_exists);
		break;
	default:
		return fail(w, -EBADFD, "unknown file type at", name);
	}
	if (w->mode == WALK_LIVE && w->seen) {
		/* Skipped (gone, or leased): the frozen pass compares it. */
		if (r == 1) {
			clone_seen_changed(w->seen, w->entry_seen);
			clone_seen_changed(w->seen, f->seen);
		} else if (r == 0) {
			/* The clone's inode that stands for it, for the frozen pass to find under its name. */
			struct stat now;

			if (S_ISREG(ss.st_mode))
				clone_seen_clone_ino(w->seen, w->entry_seen, c_ino);
			else if (fstatat(dircursor_fd(&w->c), name, &now, AT_SYMLINK_NOFOLLOW) == 0)
				clone_seen_clone_ino(w->seen, w->entry_seen, now.st_ino);
		}
	}
	/* Skipped (gone, or leased) is no first name for later names to link to. */
	if (r < 0 || r == 1 || ss.st_nlink <= 1)
		return r < 0 ? r : 0;
	/* The first name of a hard-linked inode: later names link to it. */
	if (!S_ISREG(ss.st_mode)) {
		struct stat now;
		if (w->mode == WALK_LIVE && fstatat(dircursor_fd(&w->c), name, &now, AT_SYMLINK_NOFOLLOW) == 0)
			c_ino = now.st_ino;
		else if (w->mode == WALK_CAPTURE && c_exists)
			c_ino = cs.st_ino;
	}
	return link_remember(w, ss.st_ino, c_ino, name);
}

/* handle_one(), and for tests the hook after the live pass read an entry (a directory: once it is listed). */
static int handle_entry(Walk *w, Frame *f, const char *name, uint64_t d_ino)
{
	_cleanup_free_ char *path = NULL;
	int r;

	if (!after_read_hook || w->mode != WALK_LIVE)
		return handle_one(w, f, name, d_ino);
	path = entry_path(w, name);
	if (!path)
		return -ENOMEM;
	r = handle_one(w, f, name, d_ino);
	if (r == 0)
		after_read_hook(after_read_userdata, path);
	return r;
}

/* Removes what the clone has and the source does not (the source's listing is complete). */
static int remove_extras(Walk *w, Frame *f)
{
	Listing cl = { 0 };
	const Listing *have = &cl;
	int r = 0;

	/* Capture: nothing writes to the clone while frozen, so a listing read at the frame's start still holds. */
	if (f->cls.ents)
		have = &f->cls;
	else
		r = listing_read(dircursor_fd(&w->c), UINT64_MAX, &cl); /* the clone's: as many names as the source's, freed right after */
	if (r < 0)
		return fail(w, r, "cannot list the clone's", NULL);
	for (size_t i = 0; i < have->n && r == 0; i++)
		if (!listing_has(&f->ls, listing_name(have, i)))
			r = remove_c(w, f, listing_name(have, i));
	listing_done(&cl);
	return r;
}

/* Done with a directory: drop what the source lacks, set its metadata, go up. */
static int frame_pop(Walk *w)
{
	Frame *f = &w->frames[w->depth - 1];
	int r = 0;

	if (w->mode != WALK_MEASURE) {
		int sfd = dircursor_fd(&w->s);
		struct stat sst;

		/* A directory that did not change has the names the live pass gave the clone, and their metadata. */
		bool same = f->pruned && !f->s_changed;

		if (f->c_present && !f->c_fresh && !same)
			r = remove_extras(w, f);
		if (r == 0 && (!same || f->dirty) && fstat(sfd, &sst) < 0)
			r = fail(w, negative_errno(), "cannot stat", NULL);
		if (r == 0 && (!same || f->dirty))
			r = sync_meta(w, NULL, sfd, &sst, f->c_present ? dircursor_fd(&w->c) : -EBADF,
				      !f->c_present || f->dirty);
	}
	if (r < 0)
		return r;

	if (w->depth > 1) {
		if (w->mode == WALK_CAPTURE && w->entered == w->depth) {
			r = clone_plan_add(w->plan, CLONE_PLAN_LEAVE, NULL, NULL, NULL);
			w->entered--;
		}
		if (r == 0 && f->c_present)
			r = dircursor_pop(&w->c);
		if (r == 0)
			r = dircursor_pop(&w->s);
		if (r < 0)
			return fail(w, r, "cannot go back up from", NULL);
	}
	path_truncate(w, f->path_len);
	w->mem_names -= f->mem;
	free(f->name);
	listing_done(&f->ls);
	listing_done(&f->cls);
	w->depth--;
	return 0;
}

static void walk_done(Walk *w)
{
	while (w->depth > 0) {
		Frame *f = &w->frames[--w->depth];
		free(f->name);
		listing_done(&f->ls);
		listing_done(&f->cls);
	}
	free(w->frames);
	for (size_t i = 0; i < w->n_links; i++)
		free(w->linkv[i].c_path);
	free(w->linkv);
	u64map_done(&w->links);
	u64map_done(&w->claims);
	free(w->path);
	free(w->changed);
	if (w->s.levels)
		dircursor_done(&w->s);
	if (w->c.levels)
		dircursor_done(&w->c);
}

/* One pass over the whole tree. @fresh: the clone's root is empty. */
static int walk_run(Walk *w, bool fresh)
{
	struct stat a, b = { 0 };
	int r;

	r = dircursor_init(&w->s, w->p->src_fd);
	if (r < 0)
		return fail(w, r, "cannot open the source", NULL);
	if (fstat(w->p->src_fd, &a) < 0)
		return fail(w, negative_errno(), "cannot stat the source", NULL);
	if (w->mode != WALK_MEASURE) {
		if (fstat(w->p->dst_fd, &b) < 0)
			return fail(w, negative_errno(), "cannot stat the clone", NULL);
		if (b.st_dev != a.st_dev && !(w->p->other_fs && w->p->allow_copy))
			return errmsg_set(w->reterr_msg, -EXDEV, "the clone must be on the source's filesystem");
		r = dircursor_init(&w->c, w->p->dst_fd);
		if (r < 0)
			return fail(w, r, "cannot open the clone", NULL);
	}
	w->entry_seen = CLONE_SEEN_NONE;
	if (w->seen && w->mode == WALK_LIVE) {
		w->entry_seen = clone_seen_add(w->seen, &a, CLONE_SEEN_NONE);
		clone_seen_clone_ino(w->seen, w->entry_seen, b.st_ino);
	} else if (w->seen && w->mode == WALK_CAPTURE) {
		/* Nothing changed at all: the clone is the source as of now. */
		if (clone_seen_unchanged(w->seen, a.st_ino, NULL))
			return 0;
		w->entry_seen = clone_seen_find(w->seen, a.st_ino);
	}
	r = frame_push(w, NULL, w->mode != WALK_MEASURE, fresh);
	if (r < 0)
		return fail(w, r, "cannot list the source", NULL);
	w->entered = 1;

	while (w->depth > 0) {
		Frame *f = &w->frames[w->depth - 1];

		if (f->i < f->ls.n) {
			uint64_t d_ino = f->ls.ents[f->i].ino;
			const char *name = listing_name(&f->ls, f->i++);
			r = handle_entry(w, f, name, d_ino);
		} else
			r = frame_pop(w);
		if (r < 0)
			return r;
	}
	return 0;
}

static void stats_reset_tree(CloneStats *st)
{
	st->files = st->dirs = st->symlinks = st->specials = st->hardlinks = st->bytes = 0;
}

static uint64_t mem_max(const CloneParams *p)
{
	return p->mem_max ? p->mem_max : CLONE_MEM_MAX_DEFAULT;
}

/* @seen: notes what the pass reads, then reads the generations before the freeze (bulk stats; without them, off). */
static int live_pass(const CloneParams *p, CloneStats *st, bool *reflink, bool fresh, CloneSeen *seen,
		     char **reterr_msg)
{
	Walk w = { .mode = WALK_LIVE, .p = p, .st = st, .reflink = reflink, .reterr_msg = reterr_msg,
		   .tolerant = p->freeze_fd >= 0, .mem_max = mem_max(p) };
	int r;

	stats_reset_tree(st);
	clone_seen_start(seen);
	/*
	 * A later pass keeps a clone's file when FIEMAP shows the same blocks, and FIEMAP does not see dirty pages:
	 * what was written before the pass began goes to disk first, what is written after has a racy change time.
	 */
	if (seen->on && !fresh && syncfs(p->src_fd) < 0)
		clone_seen_done(seen);
	w.seen = seen->on ? seen : NULL;
	r = walk_run(&w, fresh);
	walk_done(&w);
	if (r == 0 && seen->on)
		(void)clone_seen_prepare(seen, p->src_fd); /* no bulk stats: every entry is compared */
	return r;
}

/* @seen: what changed since the live pass (clone_seen_check() done), or NULL: compare every entry. */
static int capture_pass(const CloneParams *p, CloneStats *st, ClonePlan *plan, bool verify, CloneSeen *seen,
			uint64_t deadline_us, uint64_t *ret_examined, char **reterr_msg)
{
	bool reflink = true;
	Walk w = { .mode = WALK_CAPTURE, .p = p, .st = st, .reflink = &reflink, .plan = plan, .verify = verify,
		   .seen = seen, .deadline_us = deadline_us, .reterr_msg = reterr_msg, .mem_max = mem_max(p) };
	int r;

	stats_reset_tree(st);
	st->delta_bytes = 0;
	r = walk_run(&w, false);
	if (w.changed) {
		char path[256];

		printable(w.changed, path, sizeof(path));
		r = errmsg_set(reterr_msg, -EBUSY,
			       "the source was written while it was copied ('%s' changed): a copy shares no blocks, so it "
			       "is consistent only while nothing writes to the source",
			       path);
	}
	*ret_examined = w.examined;
	walk_done(&w);
	return r;
}

/*
 * Test builds: NVMEVOL_TEST_FREEZE_HOLD_MS=N stays frozen N ms before the
 * comparison (as a slow one would; the budget counts it), so that tests can
 * stop or kill the daemon inside its freeze.
 */
static void test_hold_frozen(void)
{
#if defined(NVMEVOL_TEST_HOOKS) && NVMEVOL_TEST_HOOKS
	const char *e = getenv("NVMEVOL_TEST_FREEZE_HOLD_MS");
	uint64_t end;

	if (!e)
		return;
	end = freeze_now_us() + strtoull(e, NULL, 10) * 1000u;
	log_info("test hook: frozen, holding the freeze for %s ms", e);
	while (freeze_now_us() < end && !freeze_aborted())
		(void)nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
#endif
}

/*
 * Test builds: NVMEVOL_TEST_CLONE_SABOTAGE=full compares every entry while
 * frozen (no bulk stats: the engine as it was before them, for benchmarks);
 * a list of ctime, racy, gen, atime, links, names leaves those checks of
 * clone-seen.h out, so that a test shows each one matters.
 * NVMEVOL_TEST_CLONE_TICK_MS=N compares times in steps of N ms, as a kernel
 * with a clock that coarse and no multigrain timestamps would stamp them.
 */
static void test_sabotage(CloneSeen *seen)
{
#if defined(NVMEVOL_TEST_HOOKS) && NVMEVOL_TEST_HOOKS
	static const struct {
		const char *name;
		unsigned check;
	} checks[] = {
		{ "ctime", CLONE_SEEN_CHECK_CTIME }, { "racy", CLONE_SEEN_CHECK_RACY }, { "gen", CLONE_SEEN_CHECK_GEN },
		{ "atime", CLONE_SEEN_CHECK_ATIME }, { "links", CLONE_SEEN_CHECK_LINKS }, { "names", CLONE_SEEN_CHECK_NAMES },
	};
	const char *e = getenv("NVMEVOL_TEST_CLONE_SABOTAGE"), *t = getenv("NVMEVOL_TEST_CLONE_TICK_MS");

	if (t)
		seen->tick_ns = (int64_t)strtoll(t, NULL, 10) * 1000000;
	if (!e)
		return;
	if (streq(e, "full")) {
		clone_seen_done(seen);
		return;
	}
	for (size_t i = 0; i < ELEMENTSOF(checks); i++) {
		const char *at = strstr(e, checks[i].name);
		size_t len = strlen(checks[i].name);

		if (at && (at == e || at[-1] == ',') && (at[len] == '\0' || at[len] == ','))
			seen->checks &= ~checks[i].check;
	}
	log_info("test hook: the frozen pass leaves out %s", e);
#endif
}

/* CPU time of this thread: what a freeze costs apart from waiting for others on a busy host. */
static uint64_t thread_cpu_us(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Test builds: NVMEVOL_TEST_CLONE_WRITEBACK_WAIT_MS=N waits at most N ms for XFS's writeback before a freeze. */
static unsigned writeback_wait_ms(const CloneParams *p)
{
#if defined(NVMEVOL_TEST_HOOKS) && NVMEVOL_TEST_HOOKS
	const char *e = getenv("NVMEVOL_TEST_CLONE_WRITEBACK_WAIT_MS");

	if (e)
		return (unsigned)strtoul(e, NULL, 10);
#endif
	return p->writeback_wait_ms;
}

/*
 * Freeze, capture, thaw, apply. 1 = sync again and retry: the changes exceeded
 * the plan's room, or a file could not be opened for a lease (*ret_retry_why
 * says which).
 */
static int frozen_pass(const CloneParams *p, CloneStats *st, uint64_t entries, bool verify, CloneSeen *seen,
		       char **ret_retry_why, char **reterr_msg)
{
	_cleanup_free_ char *cerr = NULL;
	ClonePlan plan;
	Freeze fz;
	uint64_t examined = 0, frozen_us = 0, deadline_us, cpu0;
	int r = 0, rt;

	clone_plan_init(&plan, p->delta_max ? p->delta_max : CLONE_DELTA_MAX_DEFAULT);
	r = freeze_begin(&fz, p->freeze_fd, p->freeze_marker, p->freeze_budget_ms);
	if (r == -ECANCELED)
		return errmsg_set(reterr_msg, r, "the plugin is stopping");
	if (r < 0) {
		errno = -r;
		return errmsg_set(reterr_msg, r, "cannot freeze the filesystem%s: %m",
				  r == -EBUSY ? " (it is already frozen)" : "");
	}
	st->freezes++;
	st->at = (int64_t)time(NULL);
	cpu0 = thread_cpu_us();
	/* Nothing may be written from here to freeze_end(): it would wait for the thaw. */
	test_hold_frozen();
	deadline_us = fz.started_us + (uint64_t)p->freeze_budget_ms * 1000u;
	/* What changed since the live pass read it; any other failure of the bulk stats: compare every entry. */
	st->frozen_check_us = 0;
	if (seen->on) {
		uint64_t t0 = freeze_now_us();

		r = clone_seen_check(seen, p->src_fd, deadline_us);
		st->frozen_check_us = freeze_now_us() - t0;
	}
	if (r != -ETIME && r != -ECANCELED)
		r = capture_pass(p, st, &plan, verify, seen->on ? seen : NULL, deadline_us, &examined, &cerr);
	rt = freeze_end(&fz, &frozen_us);
	st->frozen_cpu_us = thread_cpu_us() - cpu0;
	st->frozen_us = frozen_us;
	st->freeze_call_us = fz.freeze_call_us;
	st->frozen_checked = seen->on ? seen->checked : 0;
	st->frozen_compared = examined;

	if (rt == -ECANCELED || r == -ECANCELED) {
		clone_plan_done(&plan);
		return errmsg_set(reterr_msg, -ECANCELED,
				  "the plugin is stopping: the clone was abandoned %.0f ms into its freeze and the partition "
				  "thawed", frozen_us / 1000.0);
	}
	if (rt < 0) {
		clone_plan_done(&plan);
		errno = -rt;
		return errmsg_set(reterr_msg, rt == -ESTALE ? -ETIME : rt,
				  "the filesystem was thawed by someone else %.0f ms into the freeze (the guardian past "
				  "%u ms, or an admin): the clone would not show one instant",
				  frozen_us / 1000.0, p->freeze_budget_ms + FREEZE_GUARD_GRACE_MS);
	}
	if (r == -ETIME && seen->on) {
		clone_plan_done(&plan);
		return errmsg_set(reterr_msg, r,
				  "the freeze budget of %u ms was exceeded: %.0f ms frozen (of which %.0f ms to "
				  "flush and freeze), the bulk stats of %llu inodes read, %llu of %llu entries compared",
				  p->freeze_budget_ms, frozen_us / 1000.0, fz.freeze_call_us / 1000.0,
				  (unsigned long long)seen->checked, (unsigned long long)examined,
				  (unsigned long long)entries);
	}
	if (r == -ETIME) {
		clone_plan_done(&plan);
		return errmsg_set(reterr_msg, r,
				  "the freeze budget of %u ms was exceeded: %.0f ms frozen (of which %.0f ms to "
				  "flush and freeze), %llu of %llu entries compared",
				  p->freeze_budget_ms, frozen_us / 1000.0, fz.freeze_call_us / 1000.0,
				  (unsigned long long)examined, (unsigned long long)entries);
	}
	if (r == -E2BIG) {
		log_info("clone: the source changed by more than %zu bytes during the last pass; syncing again",
			 plan.data_max);
		clone_plan_done(&plan);
		return 1;
	}
	if (r == -EAGAIN) {
		log_info("clone: %s; syncing again", cerr);
		free(*ret_retry_why);
		*ret_retry_why = TAKE_PTR(cerr);
		clone_plan_done(&plan);
		return 1;
	}
	if (r < 0) {
		clone_plan_done(&plan);
		return errmsg_set(reterr_msg, r, "%s", cerr ? cerr : "the frozen comparison failed");
	}
	/* What the frozen pass left alone is counted as the freeze found it. */
	if (seen->on) {
		SeenCounts c;

		clone_seen_count_unvisited(seen, &c);
		st->files += c.files;
		st->dirs += c.dirs;
		st->symlinks += c.symlinks;
		st->specials += c.specials;
		st->bytes += c.bytes;
	}
	r = clone_plan_apply(&plan, p->dst_fd, reterr_msg);
	clone_plan_done(&plan);
	return r;
}

int clone_tree(const CloneParams *p, CloneStats *ret_stats, char **reterr_msg)
{
	_cleanup_free_ char *retry_why = NULL;
	CloneStats st = { 0 };
	CloneSeen seen;
	uint64_t t0 = freeze_now_us();
	unsigned attempts = p->attempts ? p->attempts : CLONE_ATTEMPTS_DEFAULT;
	bool reflink = !p->other_fs; /* blocks are never shared across filesystems */
	int r = 0;

	/* A copy is verified by modification times: a write through a mapping must fault to set them (clone.h). */
	if (p->allow_copy && p->freeze_fd >= 0 && syncfs(p->src_fd) < 0) {
		r = negative_errno();
		errno = -r;
		errmsg_set(reterr_msg, r, "cannot flush the source's filesystem: %m");
	}
	/* Only a frozen pass needs to know what changed since the live pass. */
	clone_seen_init(&seen, mem_max(p), p->freeze_fd >= 0);
	test_sabotage(&seen);
	if (r == 0)
		r = live_pass(p, &st, &reflink, true, &seen, reterr_msg);
	for (unsigned i = 0; r == 0 && p->freeze_fd >= 0; i++) {
		uint64_t entries = st.files + st.dirs + st.symlinks + st.specials + st.hardlinks;

		if (i == attempts) {
			if (retry_why)
				r = errmsg_set(reterr_msg, -EAGAIN, "%s (tried %u times)", retry_why, attempts);
			else
				r = errmsg_set(reterr_msg, -EAGAIN,
					       "the source kept changing: %u times, more than %llu MiB were written to it "
					       "between the last pass and the freeze",
					       attempts,
					       (unsigned long long)((p->delta_max ? p->delta_max : CLONE_DELTA_MAX_DEFAULT) >> 20));
			break;
		}
		if (i > 0)
			r = live_pass(p, &st, &reflink, false, &seen, reterr_msg);
		if (r == 0) {
			uint64_t waited, backlog;

			unsigned wait_ms = writeback_wait_ms(p);

			/* With no wait allowed this still forces the log, which FIFREEZE would do frozen. */
			r = freeze_wait_writeback(p->freeze_fd, wait_ms, &waited, &backlog);
			if (wait_ms > 0)
				st.writeback_wait_us += waited;
			st.writeback_backlog = backlog;
			if (r == -ECANCELED)
				r = errmsg_set(reterr_msg, r, "the plugin is stopping");
			else if (r == -ETIMEDOUT && wait_ms == 0)
				r = 0; /* no wait allowed: FIFREEZE writes it back */
			else if (r < 0) {
				log_info("clone: XFS had not written back %.1f MiB of its log after %.1f s; freezing anyway",
					 backlog / 1048576.0, waited / 1e6);
				r = 0;
			}
		}
		if (r == 0 && before_freeze_hook)
			before_freeze_hook(before_freeze_userdata, i);
		if (r == 0)
			r = frozen_pass(p, &st, entries, !reflink, &seen, &retry_why, reterr_msg);
		if (r == 0)
			break;
		if (r == 1)
			r = 0;
	}
	if (r == 0 && p->freeze_fd < 0)
		st.at = (int64_t)time(NULL);
	/* The caller commits the clone next: its content must be on disk first. */
	if (r == 0 && syncfs(p->dst_fd) < 0) {
		r = negative_errno();
		errno = -r;
		errmsg_set(reterr_msg, r, "cannot flush the clone: %m");
	}
	clone_seen_done(&seen);
	st.elapsed_us = freeze_now_us() - t0;
	if (ret_stats)
		*ret_stats = st;
	return r;
}

int clone_measure(int dirfd, uint64_t *ret_bytes, uint64_t *ret_inodes, char **reterr_msg)
{
	CloneParams p = { .src_fd = dirfd, .dst_fd = -EBADF, .freeze_fd = -EBADF };
	CloneStats st = { 0 };
	bool reflink = false;
	Walk w = { .mode = WALK_MEASURE, .p = &p, .st = &st, .reflink = &reflink, .reterr_msg = reterr_msg,
		   .tolerant = true, .mem_max = mem_max(&p) };
	int r;

	r = walk_run(&w, false);
	walk_done(&w);
	if (r < 0)
		return r;
	*ret_bytes = w.measure_bytes;
	*ret_inodes = w.measure_inodes + 1; /* the directory itself */
	return 0;
}
