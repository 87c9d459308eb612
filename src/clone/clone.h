/* SPDX-License-Identifier: MIT */
/*
 * The clone engine: makes a directory a copy of another one on the same
 * filesystem, sharing data blocks (FICLONE per regular file) and recreating
 * directories, symlinks, special files, hard links, owners, permission bits,
 * times and extended attributes (POSIX ACLs included); holes stay holes.
 * Walks of any depth keep a bounded number of descriptors (dircursor), never
 * follow a symlink, never cross a mount and never open anything of the source
 * but regular files and directories (a device node's open() runs its driver).
 *
 * A source in use is cloned as of one instant. FICLONE cannot run while the
 * filesystem is frozen (it waits for the thaw like every writer), so the
 * engine works in passes:
 *   1. clone the tree while it is written to (each file is cloned atomically,
 *      the tree as a whole is not);
 *   2. freeze; compare source and clone read-only: where a file's blocks are
 *      no longer shared (the source was written since: XFS copies on write),
 *      read those bytes into memory, and note every other difference in
 *      names, types, links and metadata; thaw;
 *   3. apply the noted changes to the clone.
 * Step 2 compares only what changed since step 1 read it: step 1 notes each
 * inode's change time before reading it, and the freeze starts with bulk
 * inode stats (XFS_IOC_BULKSTAT) of those inodes; entries whose inode did not
 * change, in directories whose names did not change, are left alone
 * (clone-seen.h says exactly when an inode counts as changed). Where bulk
 * stats fail (not XFS, Linux < 5.2, an error) every entry is compared.
 * Before step 2, when XFS's log holds more than FREEZE_WRITEBACK_MIN_BYTES
 * of metadata not yet written back in place (step 1 made it: 17,000 files
 * make 10-16 MiB, 100,000 files 56 MiB), the engine waits, at most
 * CloneParams.writeback_wait_ms, for XFS to write it back by itself
 * (freeze_wait_writeback()): FIFREEZE would write it back while holding
 * every writer. XFS does that only every 30 s, so the wait is kept for the
 * sizes whose writeback would take a large part of the freeze budget.
 * The clone then equals the source at the instant of the freeze. If the
 * changes to carry exceed CloneParams.delta_max, the freeze ends, step 1 is
 * repeated on the clone (cheap: only what changed is cloned again) and the
 * freeze is tried again, at most CloneParams.attempts times. The time frozen
 * is bounded by CloneParams.freeze_budget_ms: past it the engine thaws and
 * fails with -ETIME. The budget is checked before each entry, each call of
 * bulk stats (CLONE_SEEN_BATCH inodes) and each CLONE_CAPTURE_CHUNK read of a
 * changed range, so a freeze ends at most one such step past it: one chunk
 * read, one call of bulk stats, one file's FIEMAP of up to
 * CLONE_FILE_DIFF_WINDOW of its offsets (clone-file.h), or one directory
 * listed. FIFREEZE's own flush counts against the budget and cannot be cut
 * short: when it alone takes longer, the freeze ends one step after it.
 * After freeze_abort_all() (a stop) it thaws at once and fails with
 * -ECANCELED.
 *
 * With CloneParams.other_fs the destination may be on another filesystem (each
 * walk still stays on its own one); blocks are never shared then.
 *
 * Where blocks cannot be shared (CloneParams.allow_copy), the data is copied
 * in pass 1 and the frozen pass only checks that nothing changed since:
 * sizes and modification times of files, names, types and links (a copy has
 * no shared blocks to compare, and carrying its changes would mean reading
 * every byte again while frozen). Any change fails with -EBUSY: the source is
 * in use. The filesystem is flushed first, so that a write through a shared
 * mapping after that updates the file's times.
 *
 * What the source's content may cost is bounded: its files are opened
 * O_NONBLOCK, so a file under another process's write lease (F_SETLEASE) is
 * not waited for (the kernel's lease-break-time, 45 s by default): it is
 * waited for CLONE_LEASE_WAIT_MS, then counted as changed (frozen pass: try
 * again) or refused with -EAGAIN; and the memory the walk holds (the names
 * of the directories being walked, the first path of every hard-linked file)
 * is bounded by CloneParams.mem_max: past it, -ENOBUFS. What step 1 notes
 * for step 2 (60 bytes per inode) has a bound of its own of the same size:
 * past it, step 2 compares every entry.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "clone/freeze.h"

#define CLONE_DELTA_MAX_DEFAULT (256ull << 20) /* bytes read while frozen, kept in memory */
#define CLONE_ATTEMPTS_DEFAULT 4
#define CLONE_DIR_ENTRIES_MAX 1000000          /* entries of one directory, held sorted in memory */
#define CLONE_CAPTURE_CHUNK (4ull << 20)       /* bytes read while frozen between two budget checks */
#define CLONE_MEM_MAX_DEFAULT (512ull << 20)   /* the walk's names and hard-link table */
#define CLONE_LEASE_WAIT_MS 200                /* for a lease holder to give up its lease */
/* CloneParams.writeback_wait_ms: for XFS to write back the live pass's metadata (freeze.h) */
#define CLONE_WRITEBACK_WAIT_MS 35000        /* snapshots, evacuations: past XFS's 30 s push */
#define CLONE_WRITEBACK_WAIT_CREATE_MS 15000 /* a Create from Docker: its client may give up after 30 s */

typedef struct CloneParams {
	int src_fd;                /* the source directory */
	int dst_fd;                /* an empty directory on the same filesystem */
	int freeze_fd;             /* the filesystem to freeze for a consistent clone, or -1 (nothing writes to the source) */
	const FreezeMarker *freeze_marker; /* where each freeze is marked (freeze.h); NULL: not marked (tests) */
	unsigned freeze_budget_ms; /* longest freeze */
	uint64_t delta_max;        /* 0 = CLONE_DELTA_MAX_DEFAULT */
	unsigned attempts;         /* 0 = CLONE_ATTEMPTS_DEFAULT */
	uint64_t mem_max;          /* 0 = CLONE_MEM_MAX_DEFAULT */
	bool allow_copy;           /* copy the data where blocks cannot be shared (verified under freeze_fd) */
	bool other_fs;             /* dst_fd is on another filesystem (an evacuation): every file copied; needs allow_copy */
	unsigned writeback_wait_ms; /* longest wait for XFS's writeback before a freeze (0: none; see above) */
} CloneParams;

typedef struct CloneStats {
	/* The source as of the clone's instant. */
	uint64_t files, dirs, symlinks, specials, hardlinks; /* hardlinks: names beyond an inode's first */
	uint64_t bytes;                                       /* sizes of regular files */
	/* The work. */
	uint64_t reflinked, copied; /* files whose content was shared / copied */
	uint64_t delta_bytes;       /* bytes read while frozen and written after the thaw */
	unsigned freezes;           /* freezes attempted */
	uint64_t frozen_us;         /* the last freeze, FIFREEZE to FITHAW */
	uint64_t freeze_call_us;    /* of which FIFREEZE itself (it flushes the filesystem) */
	uint64_t frozen_checked;    /* inodes whose bulk stats the last freeze read (0: none, every entry compared) */
	uint64_t frozen_compared;   /* entries the last freeze compared one by one */
	uint64_t frozen_check_us;   /* of the last freeze, the time its bulk stats took */
	uint64_t frozen_cpu_us;     /* CPU time the engine's thread spent during the last freeze (its own work) */
	uint64_t writeback_wait_us; /* waited before freezing for XFS to write back what the log held (freeze.h) */
	uint64_t writeback_backlog; /* bytes of XFS's log not yet written back before the last freeze (freeze.h) */
	int64_t at;                 /* unix time of the instant the clone shows */
	uint64_t elapsed_us;
} CloneStats;

/* Clones @p->src_fd into @p->dst_fd. On failure the destination is half-filled: the caller removes it. */
int clone_tree(const CloneParams *p, CloneStats *ret_stats, char **reterr_msg);

/*
 * For tests: called after every live pass, right before the freeze, with the
 * attempt number (0 first). Set it only while no clone runs.
 */
typedef void (*CloneBeforeFreezeHook)(void *userdata, unsigned attempt);
void clone_set_before_freeze_hook(CloneBeforeFreezeHook hook, void *userdata);

/*
 * For tests: called by the live pass right after it read an entry (a
 * directory: once it is listed), with its path from the source's root. Set it
 * only while no clone runs.
 */
typedef void (*CloneAfterReadHook)(void *userdata, const char *path);
void clone_set_after_read_hook(CloneAfterReadHook hook, void *userdata);

/* What a clone of @dirfd will be charged: allocated bytes and inodes (hard links counted once). */
int clone_measure(int dirfd, uint64_t *ret_bytes, uint64_t *ret_inodes, char **reterr_msg);
