/* SPDX-License-Identifier: MIT */
/* The operations of the plugin API (and the admin ones) over registry, store, pool, binds and trash. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "pool/sizelimit.h"
#include "manager/manager-internal.h"
#include "volume/nodepin.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/log.h"
#include "util/macro.h"

#define RESCAN_INTERVAL_MS 1000
/* Docker asks every driver's Get for a name it does not know: ask for a rescan then only rarely (or on a device change). */
#define GET_MISS_RESCAN_INTERVAL_MS 5000
/* How long Mount and Create wait for the background rescan: a scan skips a silent device after PROBE_DEADLINE_MS. */
#define RESCAN_WAIT_MS 3000
/*
 * How long a Get of an unknown name waits for it after the kernel's devices
 * changed: a scan of answering devices takes milliseconds; one with a device
 * that hangs takes PROBE_DEADLINE_MS, and Get must answer well before that.
 */
#define GET_MISS_WAIT_MS 700

int manager_new(const Settings *cfg, Manager **ret)
{
	Manager *m = calloc(1, sizeof(*m));
	int r;

	if (!m)
		return -ENOMEM;
	m->cfg = cfg;
	pthread_mutex_init(&m->create_lock, NULL);
	pthread_mutex_init(&m->export_lock, NULL);
	projid_alloc_init(&m->projids);
	pthread_mutex_init(&m->rescan_lock, NULL);
	pthread_mutex_init(&m->rescan_wait, NULL);
	{
		pthread_condattr_t ca;

		/* manager-rescan.c's deadlines are CLOCK_MONOTONIC: a clock step never stretches a wait. */
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&m->rescan_wake, &ca);
		pthread_cond_init(&m->rescan_done, &ca);
		pthread_condattr_destroy(&ca);
	}
	r = pool_new(cfg, &m->pool);
	if (r == 0)
		r = registry_new(&m->reg);
	if (r == 0)
		r = trash_new(&m->trash);
	if (r < 0) {
		manager_free(m);
		return r;
	}
	*ret = m;
	return 0;
}

Manager *manager_free(Manager *m)
{
	if (!m)
		return NULL;
	/* The threads first: the rescan's and the trash worker (it holds partition references until joined). */
	manager_rescan_stop(m);
	trash_free(m->trash);
	registry_free(m->reg);
	binds_free(m->binds);
	store_free(m->store);
	pool_free(m->pool);
	pthread_mutex_destroy(&m->create_lock);
	pthread_mutex_destroy(&m->export_lock);
	free(m->exports);
	projid_alloc_done(&m->projids);
	pthread_mutex_destroy(&m->rescan_lock);
	pthread_mutex_destroy(&m->rescan_wait);
	pthread_cond_destroy(&m->rescan_wake);
	pthread_cond_destroy(&m->rescan_done);
	free(m);
	return NULL;
}

size_t manager_count(Manager *m)
{
	return registry_count(m->reg);
}

/* ---- create ---- */

Partition *manager_choose_partition(Manager *m, const VolumeOptions *o, char **reterr_msg)
{
	_cleanup_free_ char *avail = NULL;
	Partition *part, *known;
	PartitionInfo info;

	for (int attempt = 0; attempt < 2; attempt++) {
		/* Placement ranks partitions by health: bring stale readings up to date first. */
		if (!o->partition[0])
			manager_health_refresh_all(m);
		part = o->partition[0] ? pool_find_ref(m->pool, o->partition, true) : pool_pick_most_free(m->pool);
		/* A partition shut down by an I/O error is still "present" until someone looks. */
		if (part && partition_verify_recent(m->pool, part, 1000))
			return part;
		/* The host may have added a partition since the last scan: wait (a bounded time) for the rescan. */
		(void)manager_rescan(m, RESCAN_INTERVAL_MS, RESCAN_WAIT_MS);
	}
	avail = pool_describe(m->pool);
	if (!o->partition[0]) {
		errmsg_set(reterr_msg, -ENODEV,
			   "no nvmevol partition is available for new volumes (found: %s): format one with "
			   "'mkfs.xfs -L %sNAME DEVICE' (labels starting with '%s' are used) or list devices in NVMEVOL_DEVICES",
			   avail ? avail : "?", m->cfg->label_prefix[0] ? m->cfg->label_prefix : "nvmevol-",
			   m->cfg->label_prefix);
		return NULL;
	}
	known = pool_find_ref(m->pool, o->partition, false);
	if (!known) {
		errmsg_set(reterr_msg, -ENODEV, "no nvmevol partition has the label or UUID '%s'; available: %s",
			   o->partition, avail ? avail : "?");
		return NULL;
	}
	partition_snapshot(m->pool, known, &info);
	errmsg_set(reterr_msg, -ENODEV, "partition '%s' (UUID %s) is not available: %s; available: %s", o->partition,
		   info.uuid, info.problem[0] ? info.problem : "not detected", avail ? avail : "?");
	return NULL;
}

/* What Create answers for a name that exists: success only if the options (and the SOURCE of a clone) are the same. */
static int create_existing(Volume *existing, const VolumeOptions *requested, const CloneRequest *clone,
			   char **reterr_msg)
{
	_cleanup_free_ char *diff = NULL;
	VolumeOptions opts = *requested;
	int r;

	if (existing->corrupt)
		return errmsg_set(reterr_msg, -EUCLEAN, "volume %s exists but its record is unreadable (%s)",
				  existing->name, existing->corrupt);
	if (existing->index_only)
		return errmsg_set(reterr_msg, -EEXIST,
				  "volume %s exists on partition UUID %s, which is not available; attach that disk, "
				  "or forget the volume with 'nvmevol volume forget %s'",
				  existing->name, existing->partition_uuid, existing->name);
	if (clone) {
		r = manager_clone_check_existing(existing, clone, &opts, reterr_msg);
		if (r < 0)
			return r;
	}
	diff = volume_options_diff(existing->opts, &opts);
	if (diff)
		return errmsg_set(reterr_msg, -EEXIST, "volume %s already exists with different options: %s",
				  existing->name, diff);
	return 0;
}

static int foreign_dir_error(const char *pname, const char *name, char **reterr_msg)
{
	return errmsg_set(reterr_msg, -EEXIST,
			  "partition %s holds a directory volumes/%s without a volume record (a leftover, or data copied "
			  "there by hand): nvmevol leaves it alone; move it away, or restart the plugin to have it moved "
			  "to nvmevol/quarantine",
			  pname, name);
}

/* Creates the served directory, owned and moded as asked, with its limits. *made is set once it exists. */
int manager_make_volume_dir(Manager *m, Volume *v, PartitionFs *fs, const char *pname, bool *made, char **reterr_msg)
{
	_cleanup_close_ int fd = -EBADF;
	struct stat st;
	int r;

	if (mkdirat(fs->volumes_fd, v->name, 0700) < 0) {
		if (errno == EEXIST)
			return foreign_dir_error(pname, v->name, reterr_msg);
		return errmsg_set(reterr_msg, negative_errno(), "cannot create the volume directory on partition %s: %s",
				  pname, errno_str(errno));
	}
	*made = true;
	fd = openat(fs->volumes_fd, v->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_dev != fs->dev)
		return errmsg_set(reterr_msg, fd < 0 ? negative_errno() : -EXDEV,
				  "the new volume directory changed under nvmevol");
	if (fchown(fd, v->opts->has_uid ? v->opts->uid : 0, v->opts->has_gid ? v->opts->gid : 0) < 0 ||
	    fchmod(fd, v->opts->has_mode ? v->opts->mode : 0755) < 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot set owner or mode of the volume directory: %s",
				  errno_str(errno));
	r = sizelimit_apply_new(&m->projids, m->reg, fs, v, fd, reterr_msg);
	if (r < 0)
		return r;
	if (fsync(fd) < 0 || fsync(fs->volumes_fd) < 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot sync the volume directory: %s",
				  errno_str(errno));
	return 0;
}

/* Whether @part may take the new volume @name: adopted, no foreign record of that name, health, limits. */
int manager_check_target(Manager *m, Partition *part, PartitionFs *fs, const PartitionInfo *info, const char *pname,
			 const char *name, const VolumeOptions *opts, char **reterr_msg)
{
	PartitionInfo now;
	struct stat st;
	int r;

	if (!info->adopted || fs->read_only)
		return errmsg_set(reterr_msg, -EROFS,
				  "partition %s (UUID %s) appeared after the plugin started and is read-only until it is "
				  "adopted: run 'nvmevol partition adopt %s' (or restart the plugin) to let it receive new volumes",
				  pname, info->uuid, info->uuid);
	if (store_has_record(fs, name))
		/* Never overwrite (or, on rollback, delete) a record this create did not write. */
		return errmsg_set(reterr_msg, -EEXIST,
				  "partition %s already has a record for a volume %s that nvmevol has not loaded; restart the "
				  "plugin to load it", pname, name);
	/*
	 * Before the pending index entry is written: that entry may only ever account
	 * for a directory this create makes (start-up moves such a one to the trash).
	 */
	if (fstatat(fs->volumes_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return foreign_dir_error(pname, name, reterr_msg);
	if (errno != ENOENT)
		return errmsg_set(reterr_msg, negative_errno(), "cannot look at volumes/%s on partition %s: %s", name,
				  pname, errno_str(errno));
	r = manager_health_check_create(m, part, name, opts, reterr_msg);
	if (r < 0)
		return r;
	/* After the health check: a fresh reading with a critical warning may have cordoned it just now. */
	partition_snapshot(m->pool, part, &now);
	r = manager_cordon_check_create(&now, pname, name, reterr_msg);
	if (r < 0)
		return r;
	return sizelimit_check_create(fs, pname, opts, reterr_msg);
}

/* volumes/@name into the trash (*@ret_entry): deleting its contents can take long, the trash worker does it. */
static int move_to_trash(PartitionFs *fs, const char *name, char ret_entry[static TRASH_ENTRY_MAX])
{
	return trash_move_in(fs, fs->volumes_fd, name, ret_entry);
}

/*
 * Writes the new volume @v and registers it, or undoes exactly what it wrote.
 * Order: index entry "pending", directory (filled by the clone of @prep, if
 * any), record, index entry "committed". The record on the partition is the
 * commit point. A crash before it leaves a pending index entry whose
 * partition has no record (dropped at start) and maybe a directory that the
 * pending entry accounts for (moved to the trash at start): never visible. A
 * crash after it leaves a record with a pending entry: start-up serves the
 * volume and marks the entry committed.
 */
static int commit_volume(Manager *m, Volume *v, PartitionFs *fs, const char *pname, ClonePrep *prep,
			 char **reterr_msg)
{
	bool made_index = false, made_dir = false, made_record = false, trashed = false, hooked = false;
	char trash_name[TRASH_ENTRY_MAX];
	int r;

	made_index = true; /* even a failed atomic write may have renamed the file into place */
	r = store_save_index(m->store, v, VOLUME_INDEX_PENDING);
	if (r < 0) {
		errmsg_set(reterr_msg, r, "cannot write the volume index in %s: %s", store_path(m->store), errno_str(r));
		goto rollback;
	}
	r = manager_make_volume_dir(m, v, fs, pname, &made_dir, reterr_msg);
	if (r < 0)
		goto rollback;
	/* The clone fills the directory before the commit point: a crash leaves a directory start-up rolls back. */
	if (prep) {
		r = manager_clone_run(m, prep, v, fs, reterr_msg);
		if (r < 0)
			goto rollback;
	}
	if (prep && prep->hook) {
		r = prep->hook->before_commit(m, v, fs, prep->hook->userdata, reterr_msg);
		if (r < 0)
			goto rollback;
		hooked = true;
	}
	made_record = true;
	r = store_save_record(fs, v);
	if (r < 0) {
		errmsg_set(reterr_msg, r, "cannot commit the volume record on partition %s: %s", pname, errno_str(r));
		goto rollback;
	}
	/* Not served yet: a volume whose entry still said "pending" could lose its data with a lost record. */
	r = store_save_index(m->store, v, VOLUME_INDEX_COMMITTED);
	if (r < 0) {
		errmsg_set(reterr_msg, r, "cannot write the volume index in %s: %s", store_path(m->store), errno_str(r));
		goto rollback;
	}
	registry_write_lock(m->reg);
	r = registry_insert_locked(m->reg, v);
	registry_unlock(m->reg);
	if (r < 0) {
		errmsg_set(reterr_msg, r, "cannot register the volume: %s", errno_str(r));
		goto rollback;
	}
	/* Reserved until now: a resize during the clone could otherwise have taken the same ID. */
	sizelimit_commit_id(&m->projids, v->part, v->projid);
	return 0;

rollback:
	/* Undo exactly what this create did, newest first. */
	if (hooked)
		prep->hook->undo(m, v, fs, prep->hook->userdata);
	if (made_record)
		(void)store_delete_record(fs, v->name);
	if (made_dir) {
		/* A failed clone may have filled it with millions of entries: not deleted under create_lock. */
		trashed = move_to_trash(fs, v->name, trash_name) == 0;
		if (trashed)
			(void)fsync(fs->trash_fd);
		else
			(void)rm_rf_at(fs->volumes_fd, v->name);
		(void)fsync(fs->volumes_fd);
	}
	sizelimit_release(&m->projids, v->part, fs, v->projid);
	if (made_index)
		(void)store_delete_index(m->store, v->name);
	if (trashed) {
		PartitionInfo info;

		partition_snapshot(m->pool, v->part, &info);
		(void)trash_enqueue(m->trash, fs, info.uuid, trash_name); /* not queued: deleted at the next start */
	}
	log_warning("volume %s: create failed and was rolled back: %s", v->name,
		    reterr_msg && *reterr_msg ? *reterr_msg : errno_str(r));
	return r;
}

/* @stored: the options the record keeps when they differ from @opts (a filled create's placement), else NULL. */
static int create_locked(Manager *m, const char *name, const VolumeOptions *opts, const CloneRequest *clone,
			 int from_fd, const CreateHook *hook, const VolumeOptions *stored, char **reterr_msg)
{
	_cleanup_(volume_unrefp) Volume *existing = NULL, *v = NULL;
	_cleanup_(manager_clone_prep_done) ClonePrep prep = { .from_fd = -EBADF };
	char pname[PARTITION_NAME_MAX];
	PartitionFs *fs = NULL;
	PartitionInfo info;
	Partition *part;
	int r;

	existing = registry_lookup(m->reg, name);
	if (!existing) {
		/* A disk attached a moment ago may hold this name: if the devices changed, wait (bounded) for the rescan. */
		(void)manager_rescan(m, UINT_MAX, RESCAN_WAIT_MS);
		existing = registry_lookup(m->reg, name);
	}
	if (existing && from_fd >= 0)
		return errmsg_set(reterr_msg, -EEXIST, "volume %s exists: an import makes a new volume", name);
	if (existing)
		return create_existing(existing, opts, clone, reterr_msg);
	/* Only a new volume is refused on the wrong node: one that exists here has its data here. */
	if (opts->node[0]) {
		char here[NODE_NAME_MAX + 1];

		r = nodepin_here(here, sizeof(here));
		if (r < 0)
			return errmsg_set(reterr_msg, r, "volume %s is pinned to node %s, but this node's host name "
					  "cannot be read: %s", name, opts->node, errno_str(r));
		r = nodepin_check(name, opts->node, here, reterr_msg);
		if (r < 0) {
			log_warning("volume %s: not created: pinned to node %s, this is %s", name, opts->node, here);
			return r;
		}
	}
	if (registry_count(m->reg) >= m->cfg->max_volumes)
		return errmsg_set(reterr_msg, -EDQUOT, "the limit of %llu volumes is reached (NVMEVOL_MAX_VOLUMES)",
				  (unsigned long long)m->cfg->max_volumes);
	if (clone) {
		/* A clone goes where its source is, with the source's limits unless given. */
		r = manager_clone_prepare(m, opts, clone, &prep, reterr_msg);
		if (r < 0)
			return r;
		opts = &prep.opts;
		part = prep.part;
	} else {
		part = manager_choose_partition(m, opts, reterr_msg);
		if (!part)
			return -ENODEV;
		/* A rescan in manager_choose_partition() may have loaded a partition that has this name. */
		existing = registry_lookup(m->reg, name);
		if (existing && from_fd >= 0)
			return errmsg_set(reterr_msg, -EEXIST, "volume %s exists: an import makes a new volume", name);
		if (existing)
			return create_existing(existing, opts, clone, reterr_msg);
		if (from_fd >= 0) {
			PartitionDevice dev;

			prep = (ClonePrep){ .part = part, .opts = *opts, .from_fd = from_fd, .hook = hook };
			partition_device_snapshot(m->pool, part, &dev);
			prep.copy = dev.has_xfs && !dev.xfs.reflink;
		}
	}

	fs = partition_fs_get(m->pool, part);
	partition_snapshot(m->pool, part, &info);
	partition_display_name(&info, pname, sizeof(pname));
	if (!fs)
		return errmsg_set(reterr_msg, -ENODEV, "partition %s went away: %s", pname, info.problem);
	r = manager_check_target(m, part, fs, &info, pname, name, opts, reterr_msg);
	if (r < 0)
		goto out;

	v = volume_new(name);
	if (!v) {
		r = errmsg_set(reterr_msg, -ENOMEM, "out of memory");
		goto out;
	}
	v->state = VOLUME_READY;
	if (volume_set_options(v, stored ? stored : opts) < 0) {
		r = errmsg_set(reterr_msg, -ENOMEM, "out of memory");
		goto out;
	}
	v->part = part;
	snprintf(v->partition_uuid, sizeof(v->partition_uuid), "%s", info.uuid);
	snprintf(v->partition_label, sizeof(v->partition_label), "%s", info.label);
	v->created_at = (int64_t)time(NULL);

	r = commit_volume(m, v, fs, pname, clone || from_fd >= 0 ? &prep : NULL, reterr_msg);
	if (r == 0)
		log_info("volume %s: created on partition %s (UUID %s)%s%s", name, pname, info.uuid,
			 clone ? " as a clone of " : "", clone ? clone->from : "");
out:
	partition_fs_put(fs);
	return r;
}

int manager_create(Manager *m, const char *name, const VolumeOptions *opts, const CloneRequest *clone,
		   char **reterr_msg)
{
	int r;

	if (!volume_name_is_valid(name))
		return errmsg_set(reterr_msg, -EINVAL, "invalid volume name");
	pthread_mutex_lock(&m->create_lock);
	r = create_locked(m, name, opts, clone, -EBADF, NULL, NULL, reterr_msg);
	pthread_mutex_unlock(&m->create_lock);
	return r;
}

int manager_create_filled(Manager *m, const char *name, const VolumeOptions *opts, const char *place_uuid,
			  int from_fd, const CreateHook *hook, char **reterr_msg)
{
	VolumeOptions placed = *opts;
	int r;

	if (!volume_name_is_valid(name))
		return errmsg_set(reterr_msg, -EINVAL, "invalid volume name");
	/* Placed where @from_fd is (its blocks are shared); the record keeps partition= only if it was asked. */
	snprintf(placed.partition, sizeof(placed.partition), "%s", place_uuid);
	pthread_mutex_lock(&m->create_lock);
	r = create_locked(m, name, &placed, NULL, from_fd, hook, opts->partition[0] ? NULL : opts, reterr_msg);
	pthread_mutex_unlock(&m->create_lock);
	return r;
}

/* ---- index-only volumes: known from this host's index while their partition was missing ---- */

/* Drops @v from the registry; a shadowed record of the same name, if any, is served instead. */
static void unregister(Manager *m, Volume *v)
{
	Volume *shadow;

	registry_write_lock(m->reg);
	v->removed = true;
	registry_remove_locked(m->reg, v);
	shadow = registry_take_shadow_locked(m->reg, v->name);
	if (shadow && registry_insert_locked(m->reg, shadow) < 0)
		shadow = volume_unref(shadow);
	registry_unlock(m->reg);
	if (shadow) {
		log_warning("volume %s: now served from partition UUID %s (the copy that was shadowed)", shadow->name,
			    shadow->partition_uuid);
		(void)store_save_index(m->store, shadow, VOLUME_INDEX_COMMITTED);
		volume_unref(shadow);
	}
}

/*
 * @v's partition is present again: read its record (the caller holds op_lock).
 * -ENOENT if the partition has none: the volume is gone (dropped here).
 */
int manager_refresh_index_only(Manager *m, Volume *v, PartitionFs *fs)
{
	_cleanup_free_ char *buf = NULL, *err = NULL;
	_cleanup_(volume_unrefp) Volume *rec = NULL;
	size_t len = 0;
	int r;

	r = store_read_record(fs, v->name, &buf, &len);
	if (r == -ENOENT) {
		log_warning("volume %s: its partition UUID %s is back but holds no record of it; forgetting it",
			    v->name, v->partition_uuid);
		if (!fs->read_only)
			(void)store_delete_index(m->store, v->name);
		unregister(m, v);
		return -ENOENT;
	}
	if (r == 0)
		r = volume_record_parse(buf, len, &rec, &err);
	registry_write_lock(m->reg);
	if (r < 0) {
		free(v->corrupt);
		v->corrupt = strdup(err ? err : errno_str(r));
	} else {
		/* @v holds this host's index entry: the record grants only what that entry grants too. */
		v->grants_unconfirmed = !volume_grants_confirmed(rec->opts, v->opts);
		/* No allocation under the lock: @rec takes the old options with it. */
		const VolumeOptions *t = v->opts;
		v->opts = rec->opts;
		rec->opts = t;
		v->created_at = rec->created_at;
		v->projid = rec->projid;
		memcpy(v->partition_label, rec->partition_label, sizeof(v->partition_label));
		/* The fence travels with the record: a disk fenced elsewhere is fenced here too. */
		free(v->fence);
		v->fence = TAKE_PTR(rec->fence);
		v->fence_generation = rec->fence_generation;
	}
	v->index_only = false;
	registry_unlock(m->reg);
	log_info("volume %s: its partition UUID %s is back", v->name, v->partition_uuid);
	return 0;
}

/* ---- remove ---- */

/* A failed Remove leaves the index entry as it found it (none, if it had none). */
static void put_back_index(Manager *m, const char *name, const char *buf, size_t len)
{
	if (buf)
		(void)store_restore_index(m->store, name, buf, len);
	else
		(void)store_delete_index(m->store, name);
}

static int remove_locked(Manager *m, Volume *v, char **reterr_msg)
{
	_cleanup_free_ char *record = NULL, *index = NULL;
	char trash_name[TRASH_ENTRY_MAX], pname[PARTITION_NAME_MAX];
	size_t record_len = 0, index_len = 0;
	bool moved = true;
	PartitionFs *fs;
	PartitionInfo info;
	int r;

	if (v->removed)
		return 0;
	if (volume_mount_total(v) > 0)
		return errmsg_set(reterr_msg, -EBUSY,
				  "volume %s is in use (mounted %u time(s)); stop the containers that use it first", v->name,
				  volume_mount_total(v));
	r = manager_snapshot_check_remove(v, reterr_msg);
	if (r < 0)
		return r;
	fs = partition_fs_get(m->pool, v->part);
	partition_snapshot(m->pool, v->part, &info);
	partition_display_name(&info, pname, sizeof(pname));
	if (!fs)
		return errmsg_set(reterr_msg, -ENODEV,
				  "volume %s is on partition %s (UUID %s), which is not available (%s); reattach it to "
				  "remove the volume's data, or run 'nvmevol volume forget %s' to forget the volume",
				  v->name, pname, info.uuid, info.problem, v->name);
	if (fs->read_only) {
		r = errmsg_set(reterr_msg, -EROFS,
			       "volume %s is on partition %s, which is read-only until adopted ('nvmevol partition adopt %s')",
			       v->name, pname, info.uuid);
		goto out;
	}
	if (v->index_only && manager_refresh_index_only(m, v, fs) == -ENOENT) {
		r = 0;
		goto out;
	}
	/* Only a move's snapshots are left (checked above): they go first, each removed whole. */
	r = manager_snapshot_remove_by_move(m, v, reterr_msg);
	if (r < 0)
		goto out;

	/*
	 * Order: index entry "removing", record, directory, index entry. Deleting
	 * the record is the commit point: until then a failure changes nothing
	 * (the old record and index bytes are put back), after it the directory is
	 * unreachable. A crash after it leaves a directory that the removing entry
	 * accounts for (moved to the trash at start); a crash before it leaves the
	 * record, and start-up marks the entry committed again.
	 */
	r = store_read_record(fs, v->name, &record, &record_len);
	if (r < 0 && r != -ENOENT) {
		r = errmsg_set(reterr_msg, r, "cannot read the record of volume %s on partition %s: %s", v->name, pname,
			       errno_str(r));
		goto out;
	}
	r = store_read_index_bytes(m->store, v->name, &index, &index_len);
	if (r < 0 && r != -ENOENT) {
		r = errmsg_set(reterr_msg, r, "cannot read the index entry of volume %s in %s: %s", v->name,
			       store_path(m->store), errno_str(r));
		goto out;
	}
	r = store_save_index(m->store, v, VOLUME_INDEX_REMOVING);
	if (r < 0) {
		put_back_index(m, v->name, index, index_len);
		r = errmsg_set(reterr_msg, r, "cannot write the index entry of volume %s in %s: %s", v->name,
			       store_path(m->store), errno_str(r));
		goto out;
	}
	r = store_delete_record(fs, v->name);
	if (r < 0) {
		if (record && !store_has_record(fs, v->name))
			(void)store_restore_record(fs, v->name, record, record_len);
		put_back_index(m, v->name, index, index_len);
		r = errmsg_set(reterr_msg, r, "cannot delete the record of volume %s on partition %s: %s", v->name, pname,
			       errno_str(r));
		goto out;
	}

	r = move_to_trash(fs, v->name, trash_name);
	if (r < 0) {
		if (r != -ENOENT) {
			if (record)
				(void)store_restore_record(fs, v->name, record, record_len);
			put_back_index(m, v->name, index, index_len);
			r = errmsg_set(reterr_msg, r, "cannot move the directory of volume %s to the trash on partition %s: %s",
				       v->name, pname, errno_str(r));
			goto out;
		}
		moved = false;
	}
	if (fsync(fs->trash_fd) < 0 || fsync(fs->volumes_fd) < 0)
		log_warning_errno(errno, "volume %s: cannot sync partition %s after the remove (finished at next start)",
				  v->name, pname);
	r = store_delete_index(m->store, v->name);
	if (r < 0)
		log_warning_errno(r, "volume %s: cannot delete its index entry (dropped at next start)", v->name);
	bind_remove_mountpoint(m->binds, v->name);
	unregister(m, v);
	if (moved)
		(void)trash_enqueue(m->trash, fs, info.uuid, trash_name);
	log_info("volume %s: removed from partition %s", v->name, pname);
	r = 0;
out:
	partition_fs_put(fs);
	return r;
}

int manager_run_on_volume(Manager *m, const char *name, bool exclusive, ManagerVolumeFn fn, void *userdata,
			  char **reterr_msg)
{
	_cleanup_(volume_unrefp) Volume *v = NULL;
	int r;

	if (!volume_name_is_valid(name))
		return errmsg_set(reterr_msg, -EINVAL, "invalid volume name");
	if (exclusive)
		pthread_mutex_lock(&m->create_lock);
	v = registry_lookup(m->reg, name);
	if (v) {
		pthread_mutex_lock(&v->op_lock);
		r = v->removed ? -ENOENT : fn(m, v, userdata, reterr_msg);
		pthread_mutex_unlock(&v->op_lock);
	} else
		r = -ENOENT;
	if (exclusive)
		pthread_mutex_unlock(&m->create_lock);
	if (r == -ENOENT && (!v || v->removed))
		return errmsg_set(reterr_msg, -ENOENT, "no such volume: %s", name);
	return r;
}

static int remove_fn(Manager *m, Volume *v, void *userdata, char **reterr_msg)
{
	return remove_locked(m, v, reterr_msg);
}

int manager_remove(Manager *m, const char *name, char **reterr_msg)
{
	_cleanup_free_ char *err = NULL;
	int r = manager_run_on_volume(m, name, true, remove_fn, NULL, &err);

	if (r == -ENOENT && err && strstr(err, "no such volume")) {
		/* Docker may retry a Remove that timed out: an unknown name is already removed. */
		log_info("volume %s: remove of an unknown volume, nothing to do", name);
		return 0;
	}
	if (r < 0 && reterr_msg) {
		free(*reterr_msg);
		*reterr_msg = TAKE_PTR(err);
	}
	return r;
}

/* ---- mount and unmount ---- */

static void set_mounted(Manager *m, Volume *v, char *options)
{
	registry_write_lock(m->reg);
	free(v->bind_options);
	v->bind_options = options;
	v->mounted = options != NULL;
	registry_unlock(m->reg);
}

int manager_unbind_volume(Manager *m, Volume *v)
{
	int r = bind_unmount(m->binds, v->name);

	if (r == 0)
		set_mounted(m, v, NULL);
	return r;
}

/* A reference to @v's partition, there and sound (rescans once if it is missing); NULL and an Err if not. */
static PartitionFs *ensure_partition(Manager *m, Volume *v, char **reterr_msg)
{
	char pname[PARTITION_NAME_MAX];
	PartitionInfo info;
	PartitionFs *fs;

	fs = partition_fs_get(m->pool, v->part);
	if (!fs) {
		/* Reattached a moment ago? The background rescan mounts it: wait for it, a bounded time. */
		(void)manager_rescan(m, RESCAN_INTERVAL_MS, RESCAN_WAIT_MS);
		fs = partition_fs_get(m->pool, v->part);
	}
	if (fs && !partition_verify(m->pool, v->part)) {
		partition_fs_put(fs);
		fs = NULL;
	}
	if (fs && v->index_only && manager_refresh_index_only(m, v, fs) < 0) {
		partition_fs_put(fs);
		errmsg_set(reterr_msg, -ENOENT, "no such volume: %s", v->name);
		return NULL;
	}
	if (!fs) {
		partition_snapshot(m->pool, v->part, &info);
		partition_display_name(&info, pname, sizeof(pname));
		errmsg_set(reterr_msg, -ENODEV, "volume %s: partition %s (UUID %s) is not available: %s", v->name, pname,
			   info.uuid, info.problem[0] ? info.problem : "not detected; is the disk attached?");
	}
	return fs;
}

/*
 * The first bind of a limited volume: its limits in place, repaired if they
 * went missing (a repair at start that failed), or no bind at all.
 */
static int limits_before_mount(Manager *m, Volume *v, PartitionFs *fs, char **reterr_msg)
{
	bool changed = false;
	int r;

	if (!sizelimit_wanted(v->opts))
		return 0;
	if (!fs->quota)
		/* A limit that silently stops holding is a broken promise: the user decides. */
		return errmsg_set(reterr_msg, -EOPNOTSUPP,
				  "volume %s has a size/inodes limit, but its partition has no XFS project quota enforced "
				  "now (enforcement turned off with xfs_quota, a mount without prjquota, or a kernel "
				  "without XFS quota); not mounted without its limit. Turn enforcement back on "
				  "(xfs_quota -x -c 'enable -p' on the partition) and restart the plugin, or drop the "
				  "limit with `nvmevol volume resize %s none --inodes none`",
				  v->name, v->name);
	r = sizelimit_repair(&m->projids, m->reg, fs, v, &changed);
	if (r == 0 && changed)
		r = store_save_record(fs, v);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "volume %s: its size/inodes limit is not in place and cannot be set "
				  "(%s); not mounted without it", v->name, errno_str(r));
	return 0;
}

static int mount_locked(Manager *m, Volume *v, const char *id, char **ret_mountpoint, char **reterr_msg)
{
	_cleanup_free_ char *options = NULL;
	char path[PATH_MAX];
	PartitionFs *fs;
	unsigned flags;
	bool fresh = false;
	int r;

	if (v->removed)
		return errmsg_set(reterr_msg, -ENOENT, "no such volume: %s", v->name);
	if (v->corrupt)
		return errmsg_set(reterr_msg, -EUCLEAN, "volume %s cannot be mounted: its record is unreadable (%s)",
				  v->name, v->corrupt);
	r = manager_fence_check_mount(v, reterr_msg);
	if (r == 0)
		r = manager_evacuate_check_mount(v, reterr_msg);
	if (r < 0)
		return r;
	fs = ensure_partition(m, v, reterr_msg);
	if (!fs)
		return v->removed ? -ENOENT : -ENODEV;
	flags = bind_flags(v->opts, fs->read_only, v->grants_unconfirmed);

	if (v->mounted) {
		_cleanup_free_ char *why = NULL;
		if (bind_verify(m->binds, v->name, fs->dev, flags, NULL, &why) < 0) {
			log_warning("volume %s: mount vanished or changed (%s); mounting again", v->name, why ? why : "?");
			(void)manager_unbind_volume(m, v);
		}
	}
	if (!v->mounted) {
		r = manager_health_before_mount(m, v, reterr_msg);
		if (r < 0)
			goto out;
		r = manager_selftest_before_mount(m, v, fs, reterr_msg);
		if (r < 0)
			goto out;
		r = limits_before_mount(m, v, fs, reterr_msg);
		if (r < 0)
			goto out;
		r = bind_mount(m->binds, v->name, fs, flags, &options, reterr_msg);
		if (r < 0)
			goto out;
		set_mounted(m, v, TAKE_PTR(options));
		fresh = true;
	}

	registry_write_lock(m->reg);
	r = volume_mount_add(v, id);
	registry_unlock(m->reg);
	if (r == 0)
		r = store_save_mounts(m->store, v);
	if (r < 0) {
		registry_write_lock(m->reg);
		(void)volume_mount_drop(v, id);
		registry_unlock(m->reg);
		/* A failed atomic write may have landed (a failed fsync after the rename): write the old counts back. */
		(void)store_save_mounts(m->store, v);
		if (fresh)
			(void)manager_unbind_volume(m, v);
		r = errmsg_set(reterr_msg, r, "volume %s: cannot record the mount in %s/mounts: %s", v->name,
			       store_path(m->store), errno_str(r));
		goto out;
	}
	bind_path(m->binds, v->name, path, sizeof(path));
	*ret_mountpoint = strdup(path);
	if (!*ret_mountpoint) {
		r = -ENOMEM;
		goto out;
	}
	log_info("volume %s: mounted for %.12s (%u user(s)) at %s", v->name, id, volume_mount_total(v), path);
	r = 0;
out:
	partition_fs_put(fs);
	return r;
}

int manager_mount(Manager *m, const char *name, const char *id, char **ret_mountpoint, char **reterr_msg)
{
	_cleanup_(volume_unrefp) Volume *v = NULL;
	int r;

	if (!volume_name_is_valid(name))
		return errmsg_set(reterr_msg, -EINVAL, "invalid volume name");
	if (!mount_id_is_valid(id))
		return errmsg_set(reterr_msg, -EINVAL, "invalid mount ID");
	for (int attempt = 0;; attempt++) {
		v = registry_lookup(m->reg, name);
		if (!v)
			return errmsg_set(reterr_msg, -ENOENT, "no such volume: %s", name);
		pthread_mutex_lock(&v->op_lock);
		/* Evacuated while this Mount waited: its successor, on the new partition, is the one to mount. */
		if (!v->replaced || attempt == 2)
			break;
		pthread_mutex_unlock(&v->op_lock);
		v = volume_unref(v);
	}
	r = mount_locked(m, v, id, ret_mountpoint, reterr_msg);
	pthread_mutex_unlock(&v->op_lock);
	return r;
}

static bool has_mount_id(const Volume *v, const char *id)
{
	for (size_t i = 0; i < v->n_mounts; i++)
		if (streq(v->mounts[i].id, id))
			return true;
	return false;
}

int manager_unmount(Manager *m, const char *name, const char *id, char **reterr_msg)
{
	_cleanup_(volume_unrefp) Volume *v = NULL;
	int r = 0;

	if (!volume_name_is_valid(name))
		return errmsg_set(reterr_msg, -EINVAL, "invalid volume name");
	if (!mount_id_is_valid(id))
		return errmsg_set(reterr_msg, -EINVAL, "invalid mount ID");
	v = registry_lookup(m->reg, name);
	if (!v) {
		log_info("volume %s: unmount of an unknown volume, nothing to do", name);
		return 0;
	}
	pthread_mutex_lock(&v->op_lock);
	if (v->removed || !has_mount_id(v, id)) {
		log_info("volume %s: unmount for unknown ID %.12s, nothing to do", name, id);
		goto out;
	}
	if (volume_mount_total(v) == 1 && v->mounted) {
		r = manager_unbind_volume(m, v);
		if (r < 0) {
			r = errmsg_set(reterr_msg, r, "volume %s: unmount failed: %s", name, errno_str(r));
			goto out;
		}
	}
	registry_write_lock(m->reg);
	(void)volume_mount_drop(v, id);
	registry_unlock(m->reg);
	r = store_save_mounts(m->store, v);
	if (r < 0)
		/* The stored count stays higher: the fail-safe direction (an extra "in use"). */
		log_warning_errno(r, "volume %s: cannot record the unmount; the stored count stays higher", name);
	log_info("volume %s: unmounted for %.12s (%u user(s) left)", name, id, volume_mount_total(v));
	r = 0;
out:
	pthread_mutex_unlock(&v->op_lock);
	return r;
}

int manager_path(Manager *m, const char *name, char **ret_mountpoint, char **reterr_msg)
{
	_cleanup_(volume_unrefp) Volume *v = NULL;
	char path[PATH_MAX];
	bool mounted;

	if (!volume_name_is_valid(name))
		return errmsg_set(reterr_msg, -EINVAL, "invalid volume name");
	v = registry_lookup(m->reg, name);
	if (!v)
		return errmsg_set(reterr_msg, -ENOENT, "no such volume: %s", name);
	registry_read_lock(m->reg);
	mounted = v->mounted && !v->removed;
	registry_unlock(m->reg);
	*ret_mountpoint = NULL;
	if (mounted) {
		bind_path(m->binds, name, path, sizeof(path));
		*ret_mountpoint = strdup(path);
		if (!*ret_mountpoint)
			return -ENOMEM;
	}
	return 0;
}

int manager_get(Manager *m, const char *name, json_t **ret_volume, char **reterr_msg)
{
	_cleanup_(volume_unrefp) Volume *v = NULL;
	json_t *j;

	if (!volume_name_is_valid(name))
		return errmsg_set(reterr_msg, -EINVAL, "invalid volume name");
	v = registry_lookup(m->reg, name);
	if (!v && pool_devices_changed(m->pool)) {
		/*
		 * A disk attached a moment ago may hold it, and a "no" makes Docker
		 * create the name with another driver (docker run -v NAME): wait for
		 * the background rescan, but only GET_MISS_WAIT_MS (never scan here:
		 * a device that hangs would hold every Get).
		 */
		(void)manager_rescan(m, UINT_MAX, GET_MISS_WAIT_MS);
		v = registry_lookup(m->reg, name);
	}
	if (!v) {
		/* Else the background rescan finds a new device within a second, a relabel within 5 s. */
		manager_rescan_kick(m, GET_MISS_RESCAN_INTERVAL_MS);
		return errmsg_set(reterr_msg, -ENOENT, "no such volume: %s", name);
	}
	/* Status must not say "ready" for a partition that vanished underneath: re-check (one mountinfo read). */
	(void)partition_verify(m->pool, v->part);
	if (v->index_only && pthread_mutex_trylock(&v->op_lock) == 0) {
		PartitionFs *fs = partition_fs_get(m->pool, v->part);
		int r = fs && v->index_only ? manager_refresh_index_only(m, v, fs) : 0;
		partition_fs_put(fs);
		pthread_mutex_unlock(&v->op_lock);
		if (r == -ENOENT)
			return errmsg_set(reterr_msg, -ENOENT, "no such volume: %s", name);
	}
	j = manager_volume_json(m, v);
	if (!j)
		return errmsg_set(reterr_msg, -ENOMEM, "out of memory");
	*ret_volume = j;
	return 0;
}

int manager_list(Manager *m, ManagerListCallback cb, void *userdata)
{
	char path[PATH_MAX];

	registry_read_lock(m->reg);
	for (size_t i = 0; i < registry_size_locked(m->reg); i++) {
		Volume *v = registry_at_locked(m->reg, i);
		if (v->mounted)
			bind_path(m->binds, v->name, path, sizeof(path));
		cb(v->name, v->mounted ? path : NULL, userdata);
	}
	registry_unlock(m->reg);
	return 0;
}

/* ---- admin ---- */

static int forget_fn(Manager *m, Volume *v, void *userdata, char **reterr_msg)
{
	PartitionFs *fs = partition_fs_get(m->pool, v->part);
	int r;

	if (fs)
		r = errmsg_set(reterr_msg, -EBUSY,
			       "volume %s is on partition UUID %s, which is present: remove it with 'docker volume rm %s' "
			       "instead (forget is only for volumes whose disk is gone)",
			       v->name, v->partition_uuid, v->name);
	else if (volume_mount_total(v) > 0)
		r = errmsg_set(reterr_msg, -EBUSY, "volume %s is still counted as mounted %u time(s); release it first",
			       v->name, volume_mount_total(v));
	else {
		r = store_delete_index(m->store, v->name);
		if (r < 0)
			r = errmsg_set(reterr_msg, r, "cannot delete the index entry of %s: %s", v->name, errno_str(r));
	}
	partition_fs_put(fs);
	if (r < 0)
		return r;
	unregister(m, v);
	log_warning("volume %s: forgotten on admin request; its data and record stay on partition UUID %s, and it "
		    "comes back if that partition is attached again",
		    v->name, v->partition_uuid);
	return 0;
}

int manager_forget(Manager *m, const char *name, char **reterr_msg)
{
	return manager_run_on_volume(m, name, true, forget_fn, NULL, reterr_msg);
}

int manager_adopt_partition(Manager *m, const char *ref, char **reterr_msg)
{
	Partition *part;
	size_t mounted = 0;
	int r;

	pthread_mutex_lock(&m->create_lock);
	part = pool_find_ref(m->pool, ref, false);
	if (!part) {
		pthread_mutex_unlock(&m->create_lock);
		return errmsg_set(reterr_msg, -ENOENT, "no partition has the label or UUID '%s'", ref);
	}
	registry_read_lock(m->reg);
	for (size_t i = 0; i < registry_size_locked(m->reg); i++) {
		Volume *v = registry_at_locked(m->reg, i);
		if (v->part == part && v->mounted)
			mounted++;
	}
	registry_unlock(m->reg);
	if (mounted > 0)
		r = errmsg_set(reterr_msg, -EBUSY,
			       "%zu volume(s) of partition '%s' are mounted (read-only); stop their containers, then adopt",
			       mounted, ref);
	else {
		pthread_mutex_lock(&m->rescan_lock);
		r = pool_adopt(m->pool, part, reterr_msg);
		if (r == 0)
			manager_load_attached(m, &part, 1);
		pthread_mutex_unlock(&m->rescan_lock);
	}
	pthread_mutex_unlock(&m->create_lock);
	return r;
}
