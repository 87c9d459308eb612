/* SPDX-License-Identifier: MIT */
/* Shared between the manager's files (operations, start-up, status, self-test and quota glue). */
#pragma once

#include <limits.h>
#include <pthread.h>
#include <sys/sysmacros.h>

#include "config.h"
#include "manager.h"
#include "mount.h"
#include "pool.h"
#include "volume.h"
#include "util/errmsg.h"

DEFINE_CLEANUP_FUNC(Volume *, volume_unref)

struct Manager {
	const Config *cfg;
	Pool *pool;
	int state_fd;  /* NVMEVOL_STATE_DIR */
	int index_fd;  /* <state>/index: one small file per volume, outlives any partition */
	int mounts_fd; /* <state>/mounts: per-ID mount counts of each mounted volume (host state, never on a full disk) */
	int lock_fd;   /* <state>/lock, flock'ed: one instance per state directory */
	int prop_fd;   /* PropagatedMount: one bind per mounted volume */

	pthread_rwlock_t reg_lock;
	Volume **vols; /* sorted by name */
	size_t n_vols, cap;
	bool bulk_loading; /* start-up: append, sort once at the end (a sorted insert each is O(n²)) */

	pthread_mutex_t create_lock; /* serialises Create and Remove */
};


Volume *reg_find_locked(Manager *m, const char *name);
int reg_insert_locked(Manager *m, Volume *v);
void reg_remove_locked(Manager *m, Volume *v);
/* A new reference to the volume called @name, or NULL. */
Volume *lookup(Manager *m, const char *name);

int save_record(Manager *m, Volume *v);
int save_index(Manager *m, Volume *v);
/* Persists @v's mount counts: <state>/mounts/<name>.json while any, no file at zero. */
int save_mounts(Manager *m, Volume *v);

void mountpoint_of(Manager *m, const char *name, char *buf, size_t len);
/* @e is the bind nvmevol makes for @v: its partition, its directory, noatime,nodiratime. */
bool bind_entry_matches(const MountEntry *e, const Volume *v);
int verify_bind(Manager *m, Volume *v, char **ret_options, char **reterr_why);

/* manager-status.c: the Volume object of Get (Status included) or of List. */
json_t *volume_to_api_json(Manager *m, Volume *v, bool with_status);

/* manager-selftest.c: runs (or reuses) the partition's self-test before the first mount. */
int selftest_before_mount(Manager *m, Volume *v, char **reterr_msg);
void selftest_clean_partition(Partition *part);

/* manager-quota.c: project quota glue for size= and inodes=. */
int quota_check_create(Manager *m, Partition *part, const VolumeOptions *o, char **reterr_msg);
int quota_apply_create(Manager *m, Volume *v, int dirfd, char **reterr_msg);
void quota_release(Manager *m, Volume *v);
void quota_release_id(Manager *m, Partition *part, uint32_t projid);
json_t *quota_status(Manager *m, Volume *v);
int quota_repair(Manager *m, Volume *v);
