/* SPDX-License-Identifier: MIT */
/*
 * The volume manager: the registry of volumes, their records on the
 * partitions and the index in the state directory, and the operations the
 * plugin API exposes. Every operation returns 0 or -errno; on failure
 * *reterr_msg (malloc'd) holds the text for Docker's "Err".
 *
 * Locks, always taken in this order (never the other way round):
 *   create_lock  serialises Create, Remove, forget and adopt (what adds or drops volumes);
 *   op_lock      one per volume: its mount, self-test, unmount, remove, admin changes;
 *   rescan_lock  one partition rescan at a time, with the loading of what it attached;
 *                rescans run in their own thread (manager-rescan.c): a request never probes
 *                a device, Mount and Create wait for a rescan only a bounded time;
 *   registry     (registry.h) the volumes and their fields, memory work only;
 *   pool mutex   (pool.h) partition fields, innermost.
 * So a Mount that runs a self-test never blocks Get, List, Capabilities or
 * operations on other volumes.
 */
#pragma once

#include <jansson.h>

#include "settings.h"
#include "volume/volume-options.h"

typedef struct Manager Manager;

int manager_new(const Settings *cfg, Manager **ret);
Manager *manager_free(Manager *m);

/* Takes the state lock, discovers partitions, loads records, reconciles with mountinfo, starts the rescan thread. */
int manager_start(Manager *m, char **reterr_msg);

/* @clone (NULL = an empty volume): NEW starts as a copy of clone->from, see manager-clone.c. */
int manager_create(Manager *m, const char *name, const VolumeOptions *opts, const CloneRequest *clone,
		   char **reterr_msg);
int manager_remove(Manager *m, const char *name, char **reterr_msg);
int manager_mount(Manager *m, const char *name, const char *id, char **ret_mountpoint, char **reterr_msg);
int manager_unmount(Manager *m, const char *name, const char *id, char **reterr_msg);
/* *ret_mountpoint is NULL when the volume is not mounted. */
int manager_path(Manager *m, const char *name, char **ret_mountpoint, char **reterr_msg);
/* {"Name","Mountpoint"?,"CreatedAt","Status"} */
int manager_get(Manager *m, const char *name, json_t **ret_volume, char **reterr_msg);
/*
 * Calls @cb for every volume, sorted by name, with its mountpoint or NULL when
 * not mounted. Runs under the registry's read lock: @cb must not call back into
 * the manager. List is built this way so 10,000 volumes cost no JSON tree.
 */
typedef void (*ManagerListCallback)(const char *name, const char *mountpoint, void *userdata);
int manager_list(Manager *m, ManagerListCallback cb, void *userdata);

/* The state for the metrics file (metrics.h): partitions, self-tests, volumes. A MetricsCollect. */
struct MetricsSnapshot;
int manager_metrics_snapshot(Manager *m, struct MetricsSnapshot *ret);

/* For tests and tools: number of volumes in the registry. */
size_t manager_count(Manager *m);

/*
 * Admin: forgets volume @name whose partition is missing (drops its index
 * entry; its data and record stay on the partition and it comes back when
 * the partition does). Refused while the partition is present or the volume mounted.
 */
int manager_forget(Manager *m, const char *name, char **reterr_msg);
/*
 * Admin: cordons (@on) or uncordons partition @ref (label or UUID): no new
 * volumes while cordoned, persisted on the partition (manager-cordon.c).
 * {"partition","result","cordoned","cordon"?}
 */
int manager_partition_cordon(Manager *m, const char *ref, bool on, const char *reason, json_t **ret_result,
			     char **reterr_msg);
/*
 * Admin: cordons partition @ref, then moves each of its volumes that is not
 * in use, with its snapshots, to another partition of this host (@to, or
 * placement's choice): the final pass (only what changed since the last
 * one), then the switch at the commit point of its record; a volume in use
 * gets a live pass (@live) and waits (manager-evacuate.c).
 * {"partition","moved":[...],"waiting":[...],"refused":[...]}
 */
int manager_partition_evacuate(Manager *m, const char *ref, const char *to, bool live, json_t **ret_result,
			       char **reterr_msg);
/*
 * Fences volume @name: moved to @host (its record says so, with the time and
 * a generation number), so a Mount here is refused until it is unfenced; Get,
 * List and Remove work as before (manager-fence.c).
 */
int manager_volume_fence(Manager *m, const char *name, const char *host, json_t **ret_result, char **reterr_msg);
int manager_volume_unfence(Manager *m, const char *name, json_t **ret_result, char **reterr_msg);
/* Admin: lets partition @ref (label or UUID), found after start and read-only, receive new volumes. */
int manager_adopt_partition(Manager *m, const char *ref, char **reterr_msg);

/*
 * Admin (admin.c), over the root-only admin socket. Each returns 0 and a JSON
 * result saying what was done, or -errno and an Err that says what to do.
 */
/* {"partitions":[...],"volumes":[<Get's Volume object>...]} */
json_t *manager_status_json(Manager *m);
/* Get's Volume object plus "Admin": mount IDs and counts, the bind's device and root, the plugin's mount namespace. */
int manager_volume_show(Manager *m, const char *name, json_t **ret, char **reterr_msg);
/*
 * New size/inodes limits ({"size":"20G"|"none","inodes":...}); refused below
 * the current usage. A volume created without limits first gets a project ID
 * (every file of it is tagged, so that its usage counts).
 */
int manager_resize(Manager *m, const char *name, const json_t *changes, json_t **ret_result, char **reterr_msg);
/* New self-test policy and thresholds ({"selftest":"enforce","min_iops":"none",...}). */
int manager_set_options(Manager *m, const char *name, const json_t *changes, json_t **ret_result, char **reterr_msg);
/*
 * Clears the mount counts (and takes the bind away) of a volume no container
 * uses, as checked by the caller against @expect ({mount ID: count}, from
 * manager_volume_show): -ESTALE if the counts changed since.
 */
int manager_release(Manager *m, const char *name, const json_t *expect, json_t **ret_result, char **reterr_msg);
/*
 * Snapshots (manager-snapshot.c): @snap NULL names it by the time (UTC,
 * 20261201T174500Z). Each takes the volume's op_lock. Rollback is refused
 * while the volume is known to be in use.
 */
int manager_snapshot_create(Manager *m, const char *name, const char *snap, bool by_move, json_t **ret_result,
			    char **reterr_msg);
/* {"volume","snapshots":[...]} with each one's cost measured now (bounded in time). */
int manager_snapshot_list(Manager *m, const char *name, json_t **ret_result, char **reterr_msg);
int manager_snapshot_remove(Manager *m, const char *name, const char *snap, json_t **ret_result, char **reterr_msg);
int manager_rollback(Manager *m, const char *name, const char *snap, json_t **ret_result, char **reterr_msg);
/*
 * Export: binds snapshot @snap (NULL: a temporary one taken now, so one
 * instant even in use) read-only, nosuid, nodev at <PropagatedMount>/.export-TOKEN
 * for the admin command to read ({"volume","snapshot","temporary","token",
 * "mount","propagated_mount"}); close takes the bind away and removes a
 * temporary snapshot.
 */
int manager_export_open(Manager *m, const char *name, const char *snap, json_t **ret_result, char **reterr_msg);
int manager_export_close(Manager *m, const char *name, const char *token, json_t **ret_result, char **reterr_msg);
/*
 * Import (manager-import.c): open makes nvmevol/imports/TOKEN on the partition
 * the volume goes to and binds it at <PropagatedMount>/.import-TOKEN for the
 * command to write ({"token","partition","mount","propagated_mount",
 * "max_bytes","allow_devices"}); commit creates the volume from it (Create's
 * commit order); abort discards it.
 */
int manager_import_open(Manager *m, const char *name, const json_t *options, json_t **ret_result, char **reterr_msg);
int manager_import_commit(Manager *m, const char *name, const char *token, const char *uuid, const json_t *options,
			  json_t **ret_result, char **reterr_msg);
int manager_import_abort(Manager *m, const char *name, const char *token, const char *uuid, json_t **ret_result,
			 char **reterr_msg);
/*
 * Receive (manager-receive.c): open with @base NULL is an import's open (a
 * full stream makes a new volume); with @base, the ID of a snapshot of the
 * existing volume @name, it makes a block-sharing copy of that snapshot in
 * snapshots/<volume>/receive-TOKEN and binds it read-write at
 * <PropagatedMount>/.receive-TOKEN. Commit: the import's commit (full) or a
 * RENAME_EXCHANGE with the volume (refused while it is in use), then
 * snapshot @snap with the sender's ID @id. Abort discards it.
 */
int manager_receive_open(Manager *m, const char *name, const char *base, const json_t *options, json_t **ret_result,
			 char **reterr_msg);
int manager_receive_commit(Manager *m, const char *name, const char *token, const char *uuid, const char *base,
			   const json_t *options, const char *snap, const char *id, bool by_move, json_t **ret_result,
			   char **reterr_msg);
int manager_receive_abort(Manager *m, const char *name, const char *token, const char *uuid, const char *base,
			  json_t **ret_result, char **reterr_msg);

/*
 * Imports one index entry from the state directory of an older install:
 * *ret_outcome is "imported" (its partition is missing: now listed),
 * "known" (served already) or "stale" (its partition is here without it).
 */
int manager_import_index(Manager *m, const char *name, const char *buf, size_t len, const char **ret_outcome,
			 char **reterr_msg);
