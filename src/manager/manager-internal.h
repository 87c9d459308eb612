/* SPDX-License-Identifier: MIT */
/* The Manager's parts, shared by manager.c (operations), manager-startup.c, manager-status.c and manager-selftest.c. */
#pragma once

#include <pthread.h>

#include "pool/bind.h"
#include "settings.h"
#include "manager/manager.h"
#include "pool/pool.h"
#include "pool/projid.h"
#include "volume/registry.h"
#include "pool/store.h"
#include "pool/trash.h"
#include "volume/volume.h"

DEFINE_CLEANUP_FUNC(Volume *, volume_unref)

/*
 * manager-snapshot.c: adds what the command checks before it reads or writes
 * the directory it is told to open ("dev", "ino": of @fd, the directory bound):
 * a mount namespace that does not see the bind shows an empty directory in its
 * place, and an export of that, or an import into the host's root filesystem,
 * must fail, not succeed.
 */
int manager_bound_identity(json_t *j, int fd);

/* A snapshot bound read-only under the propagated mount for `volume export` (manager-snapshot.c). */
typedef struct ManagerExport {
	char token[17];                     /* 16 hex digits; the bind is <PropagatedMount>/.export-<token> */
	char volume[VOLUME_NAME_MAX + 1];
	char snapshot[VOLUME_NAME_MAX + 1];
	bool temporary;                     /* its snapshot was taken for it: removed when it ends */
} ManagerExport;

struct Manager {
	const Settings *cfg;
	Pool *pool;
	Registry *reg;
	Store *store;
	Binds *binds;
	Trash *trash;
	ProjidAlloc projids; /* every project ID handed out (sizelimit.c); its lock is a leaf but for the registry's */

	pthread_mutex_t create_lock; /* serialises Create, Remove and the admin operations that add or drop volumes */
	pthread_mutex_t rescan_lock; /* one rescan at a time, together with loading what it attached */
	bool starting;               /* start-up: loading in bulk, single-threaded */

	pthread_mutex_t export_lock; /* a leaf: guards exports and n_exports (added and dropped under op_lock too) */
	ManagerExport *exports;
	size_t n_exports, cap_exports;

	/* The background rescan (manager-rescan.c); its fields are guarded by rescan_wait, a leaf lock. */
	pthread_mutex_t rescan_wait;
	pthread_cond_t rescan_wake;  /* to the thread: a request, or stop */
	pthread_cond_t rescan_done;  /* from the thread: a scan finished */
	uint64_t rescan_requested;   /* requests so far */
	uint64_t rescan_covered;     /* requests that a finished scan started after */
	bool rescan_stop;
	bool rescan_running;         /* the thread exists */
	pthread_t rescan_thread;
};

/*
 * manager-rescan.c: the thread that rescans the disks, so that no request
 * waits for a device's superblock. It rescans when the kernel's devices change
 * (checked twice a second, pool_devices_changed()) and when asked.
 */
int manager_rescan_start(Manager *m);
void manager_rescan_stop(Manager *m);
/*
 * Asks for a rescan if none ran within @interval_ms or the devices changed, and
 * waits at most @wait_ms (0: not at all) for one that started after the call.
 * True if such a scan finished (or none was needed).
 */
bool manager_rescan(Manager *m, unsigned interval_ms, unsigned wait_ms);
/* Asks for a rescan if none ran within @interval_ms, and returns at once (the Get path: not even a fingerprint). */
void manager_rescan_kick(Manager *m, unsigned interval_ms);

/* manager-startup.c: loads the volumes of partitions that a rescan attached while running. */
void manager_load_attached(Manager *m, Partition **parts, size_t n);

/*
 * manager.c: runs @fn on volume @name with its op_lock held (and create_lock
 * first if @exclusive: for what drops or replaces volumes). -ENOENT and
 * "no such volume" if there is none. Admin operations are built on it.
 */
typedef int (*ManagerVolumeFn)(Manager *m, Volume *v, void *userdata, char **reterr_msg);
int manager_run_on_volume(Manager *m, const char *name, bool exclusive, ManagerVolumeFn fn, void *userdata,
			  char **reterr_msg);

/* manager.c: takes @v's bind away and marks it not mounted (the caller holds op_lock). */
int manager_unbind_volume(Manager *m, Volume *v);

/* manager-startup.c: serves @v, read from this host's index, as a volume whose partition is missing (start-up or import). */
int manager_register_index_only(Manager *m, Volume *v);

/* manager.c: reads the record of an index-only volume whose partition is back (caller holds op_lock). */
int manager_refresh_index_only(Manager *m, Volume *v, PartitionFs *fs);

/* manager-status.c: the Volume object of Get, Status included. */
json_t *manager_volume_json(Manager *m, Volume *v);
/* manager-status.c: "ready", "mounted", "fenced", "partition-missing" or "record-unreadable" (static strings; registry lock held). */
const char *manager_volume_condition(const Volume *v, const PartitionInfo *info);

/* manager-health.c: NVMe health (cached per partition) and the device policy at Mount, Create and in Status. */
int manager_health_before_mount(Manager *m, Volume *v, char **reterr_msg);
int manager_health_check_create(Manager *m, Partition *part, const char *name, const VolumeOptions *o, char **reterr_msg);
/* Reads stale health readings of present NVMe partitions and updates their placement rank. */
void manager_health_refresh_all(Manager *m);
/* For the metrics: 1 when the last NVMe health reading is OK, 0 when it warns, -1 when none is known. */
int manager_health_metric(Manager *m, Partition *part);
/* Adds "device", "xfs", "health" (last reading, never a new one) and "policy" to a partition's Status object. */
void manager_health_add_status(Manager *m, Partition *part, const VolumeOptions *o, json_t *partition);

/*
 * manager-cordon.c: writes @c to @part's nvmevol/cordon.json, then publishes
 * it (the caller holds create_lock when a Create must not race it).
 */
int manager_cordon_set(Manager *m, Partition *part, const PartitionCordon *c, char **reterr_msg);
/* The health policy's cordon of a partition whose controller reports @critical_warning (once; logged). */
void manager_cordon_for_health(Manager *m, Partition *part, uint8_t critical_warning);
/* -EPERM and an Err saying how to uncordon, when a Create names a cordoned partition. */
int manager_cordon_check_create(const PartitionInfo *info, const char *pname, const char *name, char **reterr_msg);
/* "cordoned" and, while on, "cordon": {"by","since","reason"} in a partition's Status object. */
void manager_cordon_add_status(const PartitionInfo *info, json_t *partition);

/* manager.c: what Create checks of a partition for a new volume @name, and makes its directory (evacuate uses both). */
int manager_check_target(Manager *m, Partition *part, PartitionFs *fs, const PartitionInfo *info, const char *pname,
			 const char *name, const VolumeOptions *opts, char **reterr_msg);
int manager_make_volume_dir(Manager *m, Volume *v, PartitionFs *fs, const char *pname, bool *made, char **reterr_msg);
/* manager-evacuate.c: at start, after recovery: finishes or rolls back evacuations a crash interrupted. */
void manager_evacuate_recover(Manager *m);
/* manager-evacuate.c: -EBUSY and an Err when @v's record says an evacuation of it was interrupted (its target missing). */
int manager_evacuate_check_mount(const Volume *v, char **reterr_msg);

/* manager-fence.c: -EPERM and an Err naming the new host and 'volume unfence' when @v is fenced (op_lock held). */
int manager_fence_check_mount(const Volume *v, char **reterr_msg);
/* manager-fence.c: "fenced" and "moved_to" in Status (registry lock held). */
void manager_fence_add_status(const Volume *v, json_t *status);

/* manager-clone.c: Create with from=SOURCE. */
/*
 * What a filled Create does between the copy into the new volume's directory and its record (the
 * commit point): a full receive's snapshot of that tree (manager-receive.c). @undo undoes it when the
 * create fails after it.
 */
typedef struct CreateHook {
	int (*before_commit)(Manager *m, Volume *v, PartitionFs *fs, void *userdata, char **reterr_msg);
	void (*undo)(Manager *m, Volume *v, PartitionFs *fs, void *userdata);
	void *userdata;
} CreateHook;

typedef struct ClonePrep {
	Volume *source;     /* a reference */
	Partition *part;    /* SOURCE's partition: the clone's */
	VolumeOptions opts; /* the new volume's: size and inodes inherited from SOURCE unless given */
	bool copy;          /* the partition cannot share blocks and clone_copy=true: copy the data */
	int from_fd;        /* >= 0: an import's directory to fill the volume from (source is NULL) */
	const CreateHook *hook; /* a filled Create's, or NULL */
} ClonePrep;
/* Checks a clone before anything is written: SOURCE, its partition, reflink, whether the clone fits. */
int manager_clone_prepare(Manager *m, const VolumeOptions *opts, const CloneRequest *req, ClonePrep *prep,
			 char **reterr_msg);
/* Clones SOURCE into @v's new, empty directory on @fs and fills v->clone. Takes SOURCE's op_lock. */
int manager_clone_run(Manager *m, ClonePrep *prep, Volume *v, PartitionFs *fs, char **reterr_msg);
void manager_clone_prep_done(ClonePrep *prep);
/* Create of a name that exists, with from=: it must be a clone of that SOURCE; fills inherited limits into @opts. */
int manager_clone_check_existing(Volume *existing, const CloneRequest *req, VolumeOptions *opts, char **reterr_msg);
/*
 * Whether @v is known to be in use: @mounted (through the plugin), or a bind
 * of its directory in a mount namespace the plugin can see. @why says which.
 * A miss proves nothing (other PID namespaces are not visible).
 */
bool manager_volume_known_in_use(Volume *v, PartitionFs *fs, bool mounted, char *why, size_t len);
/* "cloned_from", "cloned_at" and "clone" in Status. */
void manager_clone_add_status(Volume *v, json_t *status);

/* manager.c: the partition for a new volume with @o (its partition=, or placement); NULL and an Err if none. */
Partition *manager_choose_partition(Manager *m, const VolumeOptions *o, char **reterr_msg);
/*
 * manager.c: Create of a volume filled from @from_fd (an import), placed on partition @place_uuid (where
 * @from_fd is); its record keeps @opts, so partition= only when it was asked for. @hook: NULL, or what
 * runs before the commit.
 */
int manager_create_filled(Manager *m, const char *name, const VolumeOptions *opts, const char *place_uuid,
			  int from_fd, const CreateHook *hook, char **reterr_msg);
/* manager-import.c: manager_import_commit() with @hook for the volume's Create. */
int manager_import_commit_hooked(Manager *m, const char *name, const char *token, const char *uuid,
				 const json_t *options, const CreateHook *hook, json_t **ret_result, char **reterr_msg);

/* manager-snapshot.c: loads @v's snapshots from @fs; with @recover (start-up) settles what a crash interrupted. */
void manager_snapshot_load(Manager *m, Volume *v, PartitionFs *fs, bool recover);
/* "snapshots" in Status, each with its last measured cost (the registry lock held). */
void manager_snapshot_add_status(Volume *v, json_t *status);
/* Remove: -EBUSY and an Err naming them while @v has snapshots (op_lock held). */
int manager_snapshot_check_remove(Volume *v, char **reterr_msg);
/* Removes the snapshots a move made (op_lock held): a Remove of the volume takes them along. */
int manager_snapshot_remove_by_move(Manager *m, Volume *v, char **reterr_msg);
/* For receive (manager-receive.c), op_lock held: @v's partition, writable; an Err if not. */
PartitionFs *manager_snapshot_writable_fs(Manager *m, Volume *v, const char *what, char **reterr_msg);
/* Moves @name of @dirfd to the trash and queues it. */
int manager_snapshot_discard_dir(Manager *m, Volume *v, PartitionFs *fs, int dirfd, const char *name);
/*
 * A block-sharing copy of snapshot @s in snapshots/<volume>/@dir (no freeze): with @charge in the
 * volume's project, else in project 0 as the snapshot (a receive charges it at its commit).
 */
int manager_snapshot_build_copy(Manager *m, Volume *v, PartitionFs *fs, const VolumeSnapshot *s, const char *dir,
				bool charge, char **reterr_msg);
/* Takes snapshot @snap of @v (the frozen path) with ID @id (NULL: a new one). */
int manager_snapshot_take_locked(Manager *m, Volume *v, const char *snap, const char *id, bool by_move,
				 char **reterr_msg);
/* For an evacuation's pass (op_lock held): snapshot @snap of @v marked "evacuation"; *@ret: a copy of its record. */
int manager_snapshot_take_for_evacuation(Manager *m, Volume *v, const char *snap, VolumeSnapshot *ret,
					 char **reterr_msg);
/* Removes snapshot @snap of @v (op_lock held). */
int manager_snapshot_remove_locked(Manager *m, Volume *v, const char *snap, char **reterr_msg);
/* @v's snapshot with ID @id, or NULL (borrowed; op_lock held). */
VolumeSnapshot *manager_snapshot_find_id(Volume *v, const char *id);
/*
 * A receive's snapshot, taken of its new state @tree in @tree_dirfd before the commit that makes that
 * tree volumes/<volume>: its record carries the mark receive_root (snapshot.h), it is not listed, and
 * *@ret is its record. The caller holds op_lock; it then settles it: @committed (the commit happened)
 * clears the mark (one atomic record write) and lists it, else it is deleted.
 */
int manager_snapshot_take_received(Manager *m, Volume *v, int tree_dirfd, const char *tree, const char *snap,
				   const char *id, bool by_move, VolumeSnapshot *ret, char **reterr_msg);
int manager_snapshot_settle_received(Manager *m, Volume *v, VolumeSnapshot *s, bool committed, char **reterr_msg);
/* Start-up: deletes the marked snapshots in nvmevol/snapshots/@volume of @part, whose volume is not there. */
void manager_snapshot_drop_received(Manager *m, Partition *part, PartitionFs *fs, const char *volume);
/* manager-receive.c: start-up deletes what interrupted receives left in snapshots/<volume>/ (@vol_fd). */
void manager_receive_cleanup(Manager *m, Volume *v, PartitionFs *fs, int vol_fd);

/* manager-selftest.c: runs (or reuses) the partition's self-test before the first mount and applies the policy. */
int manager_selftest_before_mount(Manager *m, Volume *v, PartitionFs *fs, char **reterr_msg);
void manager_selftest_clean_scratch(PartitionFs *fs, const char *partition_uuid);
/* The partition's cached self-test result (figures, tested_at, age), {"running":true}, or NULL if never measured. */
json_t *manager_selftest_partition_json(Partition *part);
/* The partition's last run, its verdict against the pool-wide thresholds and a copy of its history (loaded if need be). */
struct MetricsPartition;
int manager_selftest_metrics(Manager *m, Partition *part, struct MetricsPartition *ret);
