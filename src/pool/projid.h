/* SPDX-License-Identifier: MIT */
/*
 * The one allocator of XFS project IDs. An ID is reserved the moment it is
 * handed out, under the allocator's lock, and stays reserved until its
 * holder either releases it (nothing carries it: a failed create) or commits
 * it (it is now seen by the caller's @collect: a registered volume, a
 * directory on disk). Both only drop the reservation; which one is called
 * says whether the holder made the ID visible first. The IDs in use are
 * gathered by @collect under the same lock, so no two callers can pick the
 * same free ID between a scan and the write that makes it used.
 *
 * Pure bookkeeping (no I/O of its own): sizelimit.c gathers the IDs in use.
 * Lock rule: the lock is a leaf apart from @collect, which may take the
 * registry's read lock and read directories; never call in with it held.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ProjidSet {
	uint32_t *ids;
	size_t n, cap;
	int err; /* the first failure (-ENOMEM, a directory that could not be read): the set is incomplete */
} ProjidSet;

/* Adds @id (0, the default project, is never counted). */
void projid_set_add(ProjidSet *s, uint32_t id);

typedef struct ProjidHeld {
	const void *space; /* which ID space: one per filesystem (the caller's Partition) */
	uint32_t id;
} ProjidHeld;

typedef struct ProjidAlloc {
	pthread_mutex_t lock;
	ProjidHeld *held; /* reserved, neither released nor committed yet */
	size_t n_held, cap_held;
} ProjidAlloc;

void projid_alloc_init(ProjidAlloc *a);
void projid_alloc_done(ProjidAlloc *a);

/* Adds the IDs in use in the caller's space to @used (called with the allocator's lock held). */
typedef void (*ProjidCollectFn)(ProjidSet *used, void *userdata);

/*
 * Reserves the lowest ID from @min_id up that is neither in @collect's set
 * nor reserved in @space. -ENOSPC when none is left, -ENOMEM.
 */
int projid_reserve(ProjidAlloc *a, const void *space, uint32_t min_id, ProjidCollectFn collect, void *userdata,
		   uint32_t *ret_id);
/* @id is now visible to @collect (or was never reserved: a no-op). */
void projid_commit(ProjidAlloc *a, const void *space, uint32_t id);
/* Nothing carries @id any more; it may be handed out again. */
void projid_release(ProjidAlloc *a, const void *space, uint32_t id);
/* Whether @id is reserved in @space (for tests and assertions). */
bool projid_is_reserved(ProjidAlloc *a, const void *space, uint32_t id);
