/* SPDX-License-Identifier: MIT */
/*
 * What the live pass saw of the source's inodes, so that the frozen pass
 * compares only what changed since (clone.h). For each inode the live pass
 * reads: its number, its change time from a stat taken before anything of it
 * is read, the access time it gave the clone, and the directory that holds
 * it. Before the freeze, bulk stats (XFS_IOC_BULKSTAT, device/xfs-bulkstat.h)
 * add each inode's generation; while frozen, one more round of bulk stats
 * tells which inodes changed since they were read.
 *
 * An inode counts as changed (the frozen pass compares it as before) when:
 *  - its change time differs: every write (write(), a write through a
 *    mapping: the fault that makes a page writable again after the live
 *    pass's FICLONE flushed it sets it), truncate, chmod, chown, utimes,
 *    attribute or ACL change, link, unlink and rename (XFS sets the change
 *    time of the inode renamed) sets it, and a directory's whenever a name
 *    in it is added, removed or renamed (a later live pass, which keeps a
 *    clone's file whose blocks FIEMAP shows shared, flushes the filesystem
 *    first: FIEMAP does not see dirty pages);
 *  - its change time is at or after the coarse clock at the start of the
 *    live pass (the racy rule, as git's index has it): a change in the same
 *    clock tick as the read leaves the change time as it was on a kernel
 *    without multigrain timestamps (Linux < 6.13);
 *  - its generation, type or access time differs, it is gone, or it is not
 *    a directory and has more than one name (hard links are always
 *    compared: their names may sit in directories that did not change);
 *  - the live pass skipped it (gone, or under a lease), or the realtime
 *    clock was set back since the live pass began (the racy rule needs a
 *    clock that does not go back).
 * A directory on the way to a changed inode is entered, but only its changed
 * entries are compared; one that did not change itself keeps its names, so
 * the clone's names there are not compared either. In one whose names
 * changed, an unchanged inode is left alone only where the clone's entry of
 * that name is the clone's inode made for it: XFS exchanging two names
 * (RENAME_EXCHANGE) sets the change time of neither inode.
 *
 * Memory: 60 bytes per inode, counted against the walk's limit; past it the
 * ledger is dropped and the frozen pass compares every entry, as it does on
 * a filesystem without bulk stats (not XFS, Linux < 5.2, no CAP_SYS_ADMIN)
 * or after any error of theirs.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>


#define CLONE_SEEN_NONE UINT32_MAX
#define CLONE_SEEN_BATCH 4096 /* inodes per bulk-stat call (768 KiB of records) */

/* Checks a test build can leave out (NVMEVOL_TEST_CLONE_SABOTAGE), to show each one matters. */
typedef enum CloneSeenCheck {
	CLONE_SEEN_CHECK_CTIME = 1u << 0, /* change times compared */
	CLONE_SEEN_CHECK_RACY = 1u << 1,  /* change times at or after the live pass's start count as changed */
	CLONE_SEEN_CHECK_GEN = 1u << 2,   /* generations compared */
	CLONE_SEEN_CHECK_ATIME = 1u << 3, /* access times compared */
	CLONE_SEEN_CHECK_LINKS = 1u << 4, /* hard-linked inodes always compared */
	CLONE_SEEN_CHECK_NAMES = 1u << 5, /* in a changed directory, an unchanged inode's copy found under its name */
	CLONE_SEEN_CHECK_ALL = (1u << 6) - 1,
} CloneSeenCheck;

typedef struct SeenInode {
	uint64_t ino;
	uint64_t c_ino;             /* the clone's inode the live pass made or kept for it, 0 if none */
	int64_t ctime_ns, atime_ns; /* as the live pass read them */
	uint64_t size;              /* from the frozen bulk stats */
	uint32_t gen;
	uint32_t parent;            /* the directory of its (first) name, CLONE_SEEN_NONE for the root */
	uint16_t flags;
	uint16_t mode;              /* from the frozen bulk stats */
} SeenInode;

/* What the frozen pass did not visit: unchanged inodes, counted for CloneStats. */
typedef struct SeenCounts {
	uint64_t files, dirs, symlinks, specials, bytes;
} SeenCounts;

typedef struct CloneSeen {
	SeenInode *v;
	size_t n, cap;
	uint32_t *order;      /* indexes into v sorted by inode number (clone_seen_prepare) */
	int64_t since_ns;     /* CLOCK_REALTIME_COARSE at the live pass's start */
	int64_t clock_off_ns; /* CLOCK_REALTIME - CLOCK_MONOTONIC then */
	uint64_t mem, mem_max;
	uint64_t changed;     /* inodes found changed by the last clone_seen_check() */
	uint64_t checked;     /* inodes whose bulk stats it read */
	unsigned checks;      /* CloneSeenCheck: what is compared (all, but in a sabotaged test build) */
	int64_t tick_ns;      /* tests: times compared in steps of this (a coarse clock); 0 = as they are */
	bool on;              /* false: abandoned, the frozen pass compares everything */
} CloneSeen;

/* @mem_max: the most the ledger may take; @on: whether to keep one at all. */
void clone_seen_init(CloneSeen *s, uint64_t mem_max, bool on);
void clone_seen_done(CloneSeen *s);

/* A live pass begins: forget the last one's inodes; change times from now on are racy. */
void clone_seen_start(CloneSeen *s);

/*
 * The live pass is about to read the inode of @st (a stat taken before any
 * of it is read) whose name is in the directory @parent (an index, or
 * CLONE_SEEN_NONE for the root). Its index, or CLONE_SEEN_NONE when the
 * ledger is off (it turns itself off past its memory).
 */
uint32_t clone_seen_add(CloneSeen *s, const struct stat *st, uint32_t parent);
/* Compare @idx in the frozen pass whatever its stats say (CLONE_SEEN_NONE: nothing). */
void clone_seen_changed(CloneSeen *s, uint32_t idx);
/* The directory @idx holds a name of a hard-linked inode: the frozen pass enters it. */
void clone_seen_holds_link(CloneSeen *s, uint32_t idx);
/* The access time the live pass gave the clone's copy of @idx. */
void clone_seen_atime(CloneSeen *s, uint32_t idx, const struct timespec *atime);
/* The live pass made or kept the clone's inode @c_ino for @idx. */
void clone_seen_clone_ino(CloneSeen *s, uint32_t idx, uint64_t c_ino);

/*
 * After the live pass, before the freeze: sorts the inodes and reads their
 * generations (bulk stats of the filesystem of @fd); those changed already
 * count as changed. -errno (the ledger is off then: no bulk stats here).
 */
int clone_seen_prepare(CloneSeen *s, int fd);

/*
 * Frozen: reads the bulk stats again and marks what changed and the
 * directories to enter. -ETIME past @deadline_us, -ECANCELED once stopping;
 * another -errno turns the ledger off (the caller compares everything).
 */
int clone_seen_check(CloneSeen *s, int fd, uint64_t deadline_us);

/* The index of @ino, or CLONE_SEEN_NONE. */
uint32_t clone_seen_find(const CloneSeen *s, uint64_t ino);
/*
 * Whether the frozen pass may leave @ino alone: seen, unchanged, and nothing
 * changed below it; *ret_c_ino: the clone's inode that stands for it.
 */
bool clone_seen_unchanged(const CloneSeen *s, uint64_t ino, uint64_t *ret_c_ino);
/* Whether the directory @idx changed itself (its names, or its metadata). */
bool clone_seen_dir_changed(const CloneSeen *s, uint32_t idx);
/* Whether the clone's directory @c_ino is the live pass's copy of the source's @s_ino. */
bool clone_seen_is_copy(const CloneSeen *s, uint64_t s_ino, uint64_t c_ino);
/* The frozen pass compared @idx (it counts it itself). */
void clone_seen_visited(CloneSeen *s, uint32_t idx);
/* The inodes the frozen pass did not visit, as of the freeze. */
void clone_seen_count_unvisited(const CloneSeen *s, SeenCounts *ret);
