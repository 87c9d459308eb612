/* SPDX-License-Identifier: MIT */
/*
 * The partition pool: XFS filesystems found by probe, mounted by nvmevol
 * (noatime,nodiratime, private) under the partition root, verified against
 * mountinfo, and laid out as <fs>/nvmevol/{volumes,meta,trash,selftest,quarantine}.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"

#define PARTITION_MOUNT_OPTIONS "noatime,nodiratime"

typedef struct Partition {
	char uuid[64];
	char label[64];
	char device[256];
	char *mountpoint;     /* <partition_root>/<uuid> */
	bool present;         /* mounted, verified and laid out */
	char *problem;        /* why it is not present (for Status and errors) */
	dev_t dev;
	unsigned logical_sector_size;
	char verified_options[256]; /* vfs options read back from mountinfo */
	uint64_t verified_at_ms;      /* CLOCK_MONOTONIC of the last partition_verify() */
	bool quota;           /* project quota enforced on this filesystem */
	int root_fd;          /* the mounted root, O_DIRECTORY */
	int tree_fd;          /* nvmevol/ */
	int volumes_fd;       /* nvmevol/volumes: one served directory per volume */
	int meta_fd;          /* nvmevol/meta: one record per volume */
	int trash_fd;         /* nvmevol/trash: removed volumes being deleted */
	int scratch_fd;       /* nvmevol/selftest: self-test scratch area */
	int quarantine_fd;    /* nvmevol/quarantine: orphans kept for the admin */

	pthread_mutex_t selftest_lock; /* one self-test per partition at a time */
	void *selftest_cache;          /* owned by the self-test glue in the manager */
} Partition;

typedef struct Pool Pool;

int pool_new(const Config *cfg, Pool **ret);
Pool *pool_free(Pool *p);

/*
 * Discovers partitions and mounts the new ones; re-verifies the known ones.
 * Logs what it finds and what it refuses. Safe to call again at any time;
 * Partition pointers stay valid for the pool's lifetime.
 */
int pool_scan(Pool *p);
/* pool_scan() unless one ran in the last @min_interval_ms. */
int pool_rescan_if_stale(Pool *p, unsigned min_interval_ms);

size_t pool_size(Pool *p);
Partition *pool_get(Pool *p, size_t i);
/* By UUID, present or not. */
Partition *pool_find_uuid(Pool *p, const char *uuid);
/* A present partition whose label or UUID is @ref. */
Partition *pool_find_ref(Pool *p, const char *ref);
/* Any known partition (present or not) whose label or UUID is @ref. */
Partition *pool_find_ref_any(Pool *p, const char *ref);
/* The present partition with the most free space, or NULL. */
Partition *pool_pick_most_free(Pool *p);
/* "label (uuid), ..." of present partitions, for error messages. */
char *pool_describe(Pool *p);

/* Re-reads mountinfo for @part: false (and marks it absent) if its mount vanished or changed. */
bool partition_verify(Pool *p, Partition *part);
/* partition_verify() at most once per @max_age_ms; the last answer in between (cheap enough for Get). */
bool partition_verify_recent(Pool *p, Partition *part, unsigned max_age_ms);
int partition_free_bytes(Partition *part, uint64_t *ret_free, uint64_t *ret_total);
