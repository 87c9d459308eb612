/* SPDX-License-Identifier: MIT */
/*
 * Start-up: lock the state directory, find the partitions, load every volume
 * record, finish or roll back what a crash interrupted, and make the kernel's
 * mounts agree with the recorded mount counts. Nothing is served before this
 * is done. Also the loading of partitions that a rescan attaches later.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "pool/sizelimit.h"
#include "manager/manager-internal.h"
#include "pool/mount.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/log.h"
#include "util/macro.h"

typedef struct LoadContext {
	Manager *m;
	Partition *part;
	PartitionFs *fs;
	PartitionInfo info;
} LoadContext;

static int register_volume(Manager *m, Volume *v)
{
	int r;

	registry_write_lock(m->reg);
	r = m->starting ? registry_append_locked(m->reg, v) : registry_insert_locked(m->reg, v);
	registry_unlock(m->reg);
	return r;
}

/*
 * A record written by nvmevol 0.1 in state "removing": true if that remove got
 * as far as the trash (then it is finished here), false if the directory is
 * intact (that remove failed or never started: the volume stays).
 */
static bool finish_legacy_remove(LoadContext *c, Volume *v)
{
	struct stat st;

	if (fstatat(c->fs->volumes_fd, v->name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		log_warning("volume %s: record says 'removing' but the directory is intact; keeping the volume", v->name);
		v->state = VOLUME_READY;
		(void)store_save_record(c->fs, v);
		return false;
	}
	log_info("volume %s: remove was interrupted after the directory went to the trash; finishing it", v->name);
	(void)store_delete_index(c->m->store, v->name);
	(void)store_delete_record(c->fs, v->name);
	return true;
}

/* Whether this host's index entry of @v, on @v's partition, grants the suid/dev that its record asks for. */
static bool index_grants(Manager *m, const Volume *v)
{
	_cleanup_(volume_unrefp) Volume *idx = NULL;

	return store_read_index(m->store, v->name, &idx) == 0 && streq(idx->partition_uuid, v->partition_uuid) &&
	       volume_grants_confirmed(&v->opts, &idx->opts);
}

/* One record of a partition being loaded (at start, or after a rescan attached it). */
static int load_record(const char *name, Volume *v, const char *err, void *userdata)
{
	LoadContext *c = userdata;
	Manager *m = c->m;
	_cleanup_(volume_unrefp) Volume *bad = NULL;
	Volume *existing;
	int r;

	if (!v) {
		/* One bad record never stops the others: the volume is reported, not guessed at. */
		bad = v = volume_new(name);
		if (!bad)
			return -ENOMEM;
		bad->corrupt = strdup(err);
		bad->state = VOLUME_READY;
		log_error("volume %s: record on partition UUID %s is unreadable (%s); it is listed but will not be mounted",
			  name, c->info.uuid, err);
	} else if (!streq(v->name, name)) {
		log_warning("partition UUID %s: meta/%s.json holds volume '%s'; ignored", c->info.uuid, name, v->name);
		return 0;
	}
	v->part = c->part;
	/* Mount counts belong to this host's Docker, and come from <state>/mounts only. */
	volume_mounts_clear(v);
	/* The record travelled with its disk (or the disk was cloned): where it is wins. */
	snprintf(v->partition_uuid, sizeof(v->partition_uuid), "%s", c->info.uuid);
	memcpy(v->partition_label, c->info.label, sizeof(v->partition_label) - 1);
	v->partition_label[sizeof(v->partition_label) - 1] = '\0';

	if (v->state == VOLUME_REMOVING && !v->corrupt && !c->fs->read_only && finish_legacy_remove(c, v))
		return 0;
	/* A record travels with its disk: what it grants counts only if this host granted it too. */
	if (!v->corrupt && (v->opts.allow_suid || v->opts.allow_devices) && !index_grants(m, v)) {
		v->grants_unconfirmed = true;
		log_warning("volume %s: its record on partition UUID %s allows%s%s, which this host never granted; bound "
			    "nosuid,nodev until 'nvmevol volume set %s%s%s'", name, c->info.uuid,
			    v->opts.allow_suid ? " suid" : "", v->opts.allow_devices ? " dev" : "", name,
			    v->opts.allow_suid ? " suid=true" : "", v->opts.allow_devices ? " dev=true" : "");
	}
	if (m->starting)
		return register_volume(m, v);

	/* A partition attached while running: its volumes join those already served. */
	registry_write_lock(m->reg);
	existing = registry_find_locked(m->reg, name);
	if (!existing)
		r = registry_insert_locked(m->reg, v);
	else if (existing->part == c->part || registry_has_shadow_locked(m->reg, name, c->part))
		r = 0; /* loaded before (an adoption reloads) or known from the index: see load_attached() */
	else {
		log_error("volume %s exists on partitions UUID %s and %s; serving the first, keeping the second "
			  "untouched (see Status 'conflicts')",
			  name, existing->partition_uuid, c->info.uuid);
		r = registry_add_shadow_locked(m->reg, v);
	}
	registry_unlock(m->reg);
	if (r == 0 && !existing && c->info.adopted && !v->corrupt)
		(void)store_save_index(m->store, v);
	return r;
}

/*
 * Of two records with one name, serve the one this host's index names (it is
 * the volume Docker knows here); else the lower partition UUID, so that the
 * choice is stable across restarts.
 */
static bool prefer_indexed(Volume *a, Volume *b, void *userdata)
{
	Manager *m = userdata;
	_cleanup_(volume_unrefp) Volume *idx = NULL;

	if (store_read_index(m->store, a->name, &idx) == 0) {
		if (streq(idx->partition_uuid, a->partition_uuid))
			return true;
		if (streq(idx->partition_uuid, b->partition_uuid))
			return false;
	}
	return strcmp(a->partition_uuid, b->partition_uuid) < 0;
}

static void quarantine_dir(PartitionFs *fs, const char *pname, const char *name, const char *why)
{
	char qname[NAME_MAX + 1];

	/* Empty leftovers are simply removed; anything with data is kept for the admin. */
	if (unlinkat(fs->volumes_fd, name, AT_REMOVEDIR) == 0) {
		(void)fsync(fs->volumes_fd);
		return;
	}
	snprintf(qname, sizeof(qname), "%.200s.%lld", name, (long long)time(NULL));
	if (renameat(fs->volumes_fd, name, fs->quarantine_fd, qname) == 0) {
		(void)fsync(fs->quarantine_fd);
		(void)fsync(fs->volumes_fd);
		log_warning("partition %s: directory volumes/%s (%s) moved to nvmevol/quarantine/%s", pname, name, why, qname);
	}
}

/* Moves an uncommitted create's (or a committed remove's) directory to the trash. */
static void roll_back_dir(Manager *m, PartitionFs *fs, const char *uuid, const char *name)
{
	char trash_name[NAME_MAX + 1];

	snprintf(trash_name, sizeof(trash_name), "%.200s.%lld", name, (long long)time(NULL));
	/* A second try for a passing error; failing twice, it waits (with its index entry) for the next start. */
	if (renameat(fs->volumes_fd, name, fs->trash_fd, trash_name) == 0 ||
	    renameat(fs->volumes_fd, name, fs->trash_fd, trash_name) == 0) {
		(void)fsync(fs->trash_fd);
		(void)fsync(fs->volumes_fd);
		log_info("volume %s: directory without a record from an interrupted create or remove; deleting it", name);
	}
}

/*
 * After every record is loaded: directories without a record, the trash,
 * self-test scratch. A directory without a record that this host's index puts
 * on this partition is an interrupted create or remove (the index entry is
 * written first and deleted last): it goes. Any other is not nvmevol's to
 * delete: kept in the quarantine if it holds anything.
 */
static void recover_partition(Manager *m, Partition *part, PartitionFs *fs, const PartitionInfo *info)
{
	char pname[PARTITION_NAME_MAX];
	struct dirent *de;
	DIR *d;

	if (fs->read_only || fs->volumes_fd < 0)
		return;
	partition_display_name(info, pname, sizeof(pname));
	d = opendir_fd(fs->volumes_fd);
	while (d && (de = readdir(d))) {
		_cleanup_(volume_unrefp) Volume *idx = NULL;
		bool valid = volume_name_is_valid(de->d_name);
		int r = -ENOENT;

		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		if (valid && store_has_record(fs, de->d_name))
			continue;
		if (valid)
			r = store_read_index(m->store, de->d_name, &idx);
		if (r == 0 && streq(idx->partition_uuid, info->uuid))
			roll_back_dir(m, fs, info->uuid, de->d_name);
		else if (r == 0 || r == -ENOENT || r == -EUCLEAN)
			quarantine_dir(fs, pname, de->d_name, "no volume record");
		else
			/* Cannot tell whose it is now: decide at the next start, move nothing. */
			log_warning("partition %s: volumes/%s has no record and its index entry is unreadable (%s); left "
				    "for the next start", pname, de->d_name, errno_str(r));
	}
	if (d)
		closedir(d);
	(void)trash_enqueue_all(m->trash, fs, info->uuid);
	manager_selftest_clean_scratch(fs, info->uuid);
}

static void load_partition(Manager *m, Partition *part, bool recover)
{
	LoadContext c = { .m = m, .part = part };
	int r;

	c.fs = partition_fs_get(m->pool, part);
	if (!c.fs)
		return;
	partition_snapshot(m->pool, part, &c.info);
	r = store_load_records(c.fs, NULL, load_record, &c);
	if (r < 0)
		log_error_errno(r, "partition UUID %s: cannot read volume records", c.info.uuid);
	if (recover)
		recover_partition(m, part, c.fs, &c.info);
	partition_fs_put(c.fs);
}

void manager_load_attached(Manager *m, Partition **parts, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		PartitionFs *fs;
		PartitionInfo info;
		Volume **stale = NULL;
		size_t n_stale = 0;

		/* Orphan directories wait for the next start: a Create may be writing one right now. */
		load_partition(m, parts[i], false);
		fs = partition_fs_get(m->pool, parts[i]);
		if (!fs)
			continue;
		partition_snapshot(m->pool, parts[i], &info);
		if (info.adopted && !fs->read_only) {
			(void)trash_enqueue_all(m->trash, fs, info.uuid);
			manager_selftest_clean_scratch(fs, info.uuid);
		}
		/* Volumes this host's index placed there: read their records now (or later, if one is busy). */
		registry_read_lock(m->reg);
		for (size_t k = 0; k < registry_size_locked(m->reg); k++) {
			Volume *v = registry_at_locked(m->reg, k);
			Volume **ns;
			if (v->part != parts[i] || !v->index_only)
				continue;
			ns = realloc(stale, (n_stale + 1) * sizeof(*ns));
			if (!ns)
				break;
			stale = ns;
			stale[n_stale++] = volume_ref(v);
		}
		registry_unlock(m->reg);
		for (size_t k = 0; k < n_stale; k++) {
			/* op_lock comes before rescan_lock: only try it; a busy volume refreshes itself. */
			if (pthread_mutex_trylock(&stale[k]->op_lock) == 0) {
				if (stale[k]->index_only)
					(void)manager_refresh_index_only(m, stale[k], fs);
				pthread_mutex_unlock(&stale[k]->op_lock);
			}
			volume_unref(stale[k]);
		}
		free(stale);
		partition_fs_put(fs);
	}
}

/* ---- the host state: index entries and mount counts ---- */

static bool volume_dir_exists(Manager *m, Partition *part, const char *name)
{
	PartitionFs *fs = partition_fs_get(m->pool, part);
	struct stat st;
	bool there = fs && fs->volumes_fd >= 0 && fstatat(fs->volumes_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;

	partition_fs_put(fs);
	return there;
}

/* An index entry only matters for a volume that no present partition has a record of. */
static bool index_entry_needed(const char *name, void *userdata)
{
	Manager *m = userdata;
	Volume *v;

	registry_write_lock(m->reg);
	v = registry_find_locked(m->reg, name);
	if (v)
		v->indexed = true;
	registry_unlock(m->reg);
	return !v;
}

static int load_index_entry(const char *name, Volume *v, const char *err, void *userdata)
{
	Manager *m = userdata;
	PartitionInfo info;
	Partition *part;

	if (!v) {
		log_error("volume %s: index entry unreadable (%s); ignored", name, err);
		return 0;
	}
	part = pool_find_uuid(m->pool, v->partition_uuid);
	if (part) {
		partition_snapshot(m->pool, part, &info);
		if (info.present && info.adopted) {
			/* The partition is here and has no record: the volume was removed (or never committed). */
			if (volume_dir_exists(m, part, name)) {
				/* Its directory could not be moved to the trash yet: the entry says it may go, next time. */
				log_warning("volume %s: directory without record still on partition UUID %s; keeping the "
					    "index entry until it is rolled back", name, info.uuid);
				return 0;
			}
			log_info("volume %s: dropping stale index entry (no record on partition UUID %s)", name, info.uuid);
			return store_delete_index(m->store, name);
		}
	}
	return manager_register_index_only(m, v);
}

int manager_register_index_only(Manager *m, Volume *v)
{
	Partition *part;

	/* Its partition is missing: keep answering Get so that Docker does not forget the volume. */
	part = pool_add_known(m->pool, v->partition_uuid, v->partition_label);
	if (!part)
		return -ENOMEM;
	volume_mounts_clear(v);
	v->part = part;
	v->index_only = true;
	v->indexed = true;
	log_warning("volume %s: partition UUID %s is missing; the volume is listed but cannot be mounted", v->name,
		    v->partition_uuid);
	return register_volume(m, v);
}

static int load_mounts_file(const char *name, Volume *counts, const char *err, void *userdata)
{
	Manager *m = userdata;
	Volume *v;

	registry_write_lock(m->reg);
	v = registry_find_locked(m->reg, name);
	if (v && counts) {
		volume_mounts_clear(v);
		v->mounts = TAKE_PTR(counts->mounts);
		v->n_mounts = counts->n_mounts;
		counts->n_mounts = 0;
	} else if (v) {
		/*
		 * The counts cannot be read: assume one user, so that a bind still there is
		 * kept (a container may be using it) and Remove says "in use". If the bind is
		 * gone, reconcile resets this; 'nvmevol volume release' clears it otherwise.
		 */
		volume_mounts_clear(v);
		(void)volume_mount_add(v, MOUNT_ID_UNREADABLE);
	}
	registry_unlock(m->reg);
	if (v) {
		if (!counts)
			log_error("volume %s: mount counts unreadable (%s); counted as in use until its bind is gone", name, err);
		return 0;
	}
	/* Counts of a volume that no longer exists: nothing can rely on them. */
	log_warning("mount counts of %s dropped (no such volume)", name);
	(void)store_delete_mounts(m->store, name);
	return 0;
}

/* ---- mounts ---- */

static bool mountpoint_in_use(const char *name, void *userdata)
{
	Manager *m = userdata;
	Volume *v = volume_name_is_valid(name) ? registry_find_locked(m->reg, name) : NULL;

	return v && v->mounted;
}

/*
 * Mount reconciliation, from one read of mountinfo: counts > 0 need the bind;
 * a bind with no counts, and any mount no volume owns, goes.
 */
static void reconcile_mounts(Manager *m)
{
	MountEntry *mounts = NULL;
	size_t n = 0, plen;
	char prop[PATH_MAX];

	bind_path(m->binds, "", prop, sizeof(prop));
	plen = strlen(prop);
	if (bind_list_all(m->binds, &mounts, &n) < 0 && bind_list_all(m->binds, &mounts, &n) < 0) {
		log_error("cannot read mountinfo; mount counts left as recorded");
		return;
	}
	/* Deepest first, so that nested strays come off before their parents. */
	for (size_t k = n; k-- > 0;) {
		const char *rest = mounts[k].target + plen;
		Volume *v = NULL;
		PartitionInfo info;

		if (!strchr(rest, '/') && volume_name_is_valid(rest))
			v = registry_find_locked(m->reg, rest);
		if (v)
			partition_snapshot(m->pool, v->part, &info);
		/*
		 * Counted and ours: keep it. An unreadable record hides the flags asked for:
		 * then our directory from our partition is enough (a container may be using it).
		 */
		if (v && !v->mounted && volume_mount_total(v) > 0 && info.present &&
		    (v->corrupt ? bind_entry_is_volume(&mounts[k], v->name, info.dev)
				: bind_entry_matches(&mounts[k], v->name, info.dev, bind_flags(&v->opts, info.read_only, v->grants_unconfirmed)))) {
			v->mounted = true;
			free(v->bind_options);
			v->bind_options = strdup(mounts[k].vfs_options);
			log_info("volume %s: still mounted with %u user(s); keeping the counts", v->name,
				 volume_mount_total(v));
			continue;
		}
		if (v && !info.present && volume_mount_total(v) > 0)
			continue; /* partition missing: leave a container's data where it is */
		log_warning("%s %s (from %s%s): unmounting", v ? "unowned or wrong mount of volume" : "stray mount",
			    mounts[k].target, mounts[k].source, mounts[k].root);
		(void)unmount_path(mounts[k].target);
	}
	mount_entries_free(mounts, n);

	for (size_t i = 0; i < registry_size_locked(m->reg); i++) {
		Volume *v = registry_at_locked(m->reg, i);
		PartitionInfo info;

		partition_snapshot(m->pool, v->part, &info);
		if (v->corrupt || v->mounted || volume_mount_total(v) == 0 || !info.present)
			continue;
		/* The bind went away (plugin disabled, daemon stopped, reboot): nobody can be using it. */
		log_info("volume %s: %u recorded mount(s) but the bind is gone; counts reset", v->name,
			 volume_mount_total(v));
		volume_mounts_clear(v);
		(void)store_save_mounts(m->store, v);
	}
	bind_clean_mountpoints(m->binds, mountpoint_in_use, m);
}

int manager_start(Manager *m, char **reterr_msg)
{
	int r;

	r = store_open(m->cfg->state_dir, &m->store, reterr_msg);
	if (r < 0)
		return r;
	r = binds_open(m->cfg->propagated_mount, &m->binds, reterr_msg);
	if (r < 0)
		return r;
	pool_set_freeze_dir(m->pool, store_freeze_dir(m->store));
	r = pool_scan(m->pool, NULL, NULL);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "partition discovery failed: %s", errno_str(r));
	/* One health reading per NVMe controller: Status and placement have it from the start. */
	manager_health_refresh_all(m);

	/*
	 * Single-threaded until the socket serves (the trash worker touches only
	 * trash directories); the registry lock is taken where functions expect it.
	 */
	m->starting = true;
	for (size_t i = 0; i < pool_size(m->pool); i++)
		load_partition(m, pool_get(m->pool, i), false);
	registry_write_lock(m->reg);
	r = registry_sort_locked(m->reg, prefer_indexed, m);
	registry_unlock(m->reg);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "out of memory");
	for (size_t i = 0; i < pool_size(m->pool); i++) {
		Partition *part = pool_get(m->pool, i);
		PartitionFs *fs = partition_fs_get(m->pool, part);
		PartitionInfo info;

		if (!fs)
			continue;
		partition_snapshot(m->pool, part, &info);
		recover_partition(m, part, fs, &info);
		partition_fs_put(fs);
	}

	r = store_load_index(m->store, index_entry_needed, load_index_entry, m);
	if (r == 0) {
		registry_write_lock(m->reg);
		r = registry_sort_locked(m->reg, prefer_indexed, m);
		registry_unlock(m->reg);
	}
	if (r == 0)
		r = store_load_mounts(m->store, load_mounts_file, m);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot read the state in %s: %s", m->cfg->state_dir, errno_str(r));

	/* Records without an index entry (a disk moved here, or a crash between the two writes); limits. */
	for (size_t i = 0; i < registry_count(m->reg); i++) {
		Volume *v;
		PartitionFs *fs;
		bool changed = false;

		registry_read_lock(m->reg);
		v = volume_ref(registry_at_locked(m->reg, i));
		registry_unlock(m->reg);
		fs = v->index_only || v->corrupt ? NULL : partition_fs_get(m->pool, v->part);
		if (fs && !v->indexed && store_save_index(m->store, v) < 0)
			log_error("volume %s: cannot write its index entry; Get will not know it if its partition goes missing",
				  v->name);
		if (fs && sizelimit_repair(&m->projids, m->reg, fs, v, &changed) == 0 && changed)
			(void)store_save_record(fs, v);
		partition_fs_put(fs);
		volume_unref(v);
	}

	/* Still single-threaded: the lock is held across the unmounts here, which is fine before serving. */
	registry_write_lock(m->reg);
	reconcile_mounts(m);
	registry_unlock(m->reg);
	m->starting = false;
	r = manager_rescan_start(m);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot start the rescan thread: %s", errno_str(r));
	log_info("ready: %zu volume(s) on %zu partition(s)", registry_count(m->reg), pool_size(m->pool));
	return 0;
}
