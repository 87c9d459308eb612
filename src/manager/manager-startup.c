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
#include <unistd.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "pool/sizelimit.h"
#include "pool/snapstore.h"
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
	       volume_grants_confirmed(v->opts, idx->opts);
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
	if (!v->corrupt && (v->opts->allow_suid || v->opts->allow_devices) && !index_grants(m, v)) {
		v->grants_unconfirmed = true;
		log_warning("volume %s: its record on partition UUID %s allows%s%s, which this host never granted; bound "
			    "nosuid,nodev until 'nvmevol volume set %s%s%s'", name, c->info.uuid,
			    v->opts->allow_suid ? " suid" : "", v->opts->allow_devices ? " dev" : "", name,
			    v->opts->allow_suid ? " suid=true" : "", v->opts->allow_devices ? " dev=true" : "");
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
		(void)store_save_index(m->store, v, VOLUME_INDEX_COMMITTED);
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

/* Moves volumes/@name to nvmevol/quarantine/<name>.<time>; *ret_qname gets that name. */
static int quarantine_move(PartitionFs *fs, const char *name, char *ret_qname, size_t qlen)
{
	snprintf(ret_qname, qlen, "%.200s.%lld", name, (long long)time(NULL));
	/*
	 * Never over an earlier entry of the same name and second. A second try for a
	 * passing error; failing twice, it stays where it is (and is reported) until the next start.
	 */
	if (renameat2(fs->volumes_fd, name, fs->quarantine_fd, ret_qname, RENAME_NOREPLACE) < 0 &&
	    renameat2(fs->volumes_fd, name, fs->quarantine_fd, ret_qname, RENAME_NOREPLACE) < 0)
		return negative_errno();
	(void)fsync(fs->quarantine_fd);
	(void)fsync(fs->volumes_fd);
	return 0;
}

/* A directory no index entry of this host accounts for: not nvmevol's to delete. */
static void quarantine_orphan(PartitionFs *fs, const char *pname, const char *name, const char *why)
{
	char qname[NAME_MAX + 1];
	int r;

	/* Empty leftovers are simply removed; anything with data is kept for the admin. */
	if (unlinkat(fs->volumes_fd, name, AT_REMOVEDIR) == 0) {
		(void)fsync(fs->volumes_fd);
		return;
	}
	r = quarantine_move(fs, name, qname, sizeof(qname));
	if (r == 0)
		log_warning("partition %s: directory volumes/%s (%s) moved to nvmevol/quarantine/%s", pname, name, why, qname);
	else
		log_error_errno(r, "partition %s: directory volumes/%s (%s) cannot be moved to nvmevol/quarantine; left "
				"in place", pname, name, why);
}

/*
 * A committed volume (by this host's index) whose record is gone: xfs_repair,
 * a partial restore of meta/, a hand-made mistake. Its data is kept, empty or
 * not, and the admin is told how to get the volume back (see Status
 * 'quarantine').
 */
static void quarantine_committed(PartitionFs *fs, const char *pname, const char *name)
{
	char qname[NAME_MAX + 1];
	int r;

	r = quarantine_move(fs, name, qname, sizeof(qname));
	if (r == 0)
		log_error("volume %s: committed (this host's index says so) but its record nvmevol/meta/%s.json is missing "
			  "on partition %s; its data was NOT deleted: it is in nvmevol/quarantine/%s. To restore it, put "
			  "the record back from a backup and move the directory back to nvmevol/volumes/%s, then restart "
			  "the plugin; or create a new volume and copy the data into it",
			  name, name, pname, qname, name);
	else
		log_error_errno(r, "volume %s: committed but its record is missing on partition %s, and its directory "
				"cannot be moved to nvmevol/quarantine; left in place, untouched", name, pname);
}

/* Moves the directory of an uncommitted create (or of a remove past its commit point) to the trash. */
static void roll_back_dir(Manager *m, PartitionFs *fs, const char *uuid, const char *name, const char *what)
{
	char trash_name[NAME_MAX + 1];

	snprintf(trash_name, sizeof(trash_name), "%.200s.%lld", name, (long long)time(NULL));
	/* A second try for a passing error; failing twice, it waits (with its index entry) for the next start. */
	if (renameat(fs->volumes_fd, name, fs->trash_fd, trash_name) == 0 ||
	    renameat(fs->volumes_fd, name, fs->trash_fd, trash_name) == 0) {
		(void)fsync(fs->trash_fd);
		(void)fsync(fs->volumes_fd);
		log_info("volume %s: directory of %s; deleting it", name, what);
	}
}

typedef struct TrashImport {
	Manager *m;
	PartitionFs *fs;
	const char *uuid;
} TrashImport;

static int trash_import(const char *name, void *userdata)
{
	TrashImport *t = userdata;
	char entry[TRASH_ENTRY_MAX];

	if (trash_move_in(t->fs, t->fs->imports_fd, name, entry) == 0)
		log_info("partition UUID %s: deleting nvmevol/imports/%s, an import that was never committed", t->uuid, name);
	return 0;
}

/*
 * Whether a record of @name on @part was loaded (served, shadowed, or listed as
 * unreadable): then it exists, and meta/ need not be asked again. Only at
 * start, where the registry holds every record read.
 */
static bool record_loaded(Manager *m, Partition *part, const char *name)
{
	Volume *v;
	bool loaded;

	registry_read_lock(m->reg);
	v = registry_find_locked(m->reg, name);
	loaded = (v && v->part == part && !v->index_only) || registry_has_shadow_locked(m->reg, name, part);
	registry_unlock(m->reg);
	return loaded;
}

/*
 * After every record is loaded: directories without a record, the trash,
 * self-test scratch. Only what this host's index proves was never committed
 * (a "pending" entry: a Create that crashed before its record) or was
 * committed for removal (a "removing" entry: a Remove that deleted its
 * record) goes to the trash. A committed volume without its record, and any
 * directory no index entry accounts for, go to the quarantine, data kept.
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
		if (valid && (record_loaded(m, part, de->d_name) || store_has_record(fs, de->d_name)))
			continue;
		if (valid)
			r = store_read_index(m->store, de->d_name, &idx);
		if (r == 0 && streq(idx->partition_uuid, info->uuid) && idx->index_state == VOLUME_INDEX_PENDING)
			roll_back_dir(m, fs, info->uuid, de->d_name, "a create interrupted before its commit");
		else if (r == 0 && streq(idx->partition_uuid, info->uuid) && idx->index_state == VOLUME_INDEX_REMOVING)
			roll_back_dir(m, fs, info->uuid, de->d_name, "a remove interrupted after its commit");
		else if (r == 0 && streq(idx->partition_uuid, info->uuid))
			quarantine_committed(fs, pname, de->d_name);
		else if (r == 0 || r == -ENOENT || r == -EUCLEAN)
			quarantine_orphan(fs, pname, de->d_name, r == -EUCLEAN ? "no volume record, unreadable index entry"
										: "no volume record");
		else
			/* Cannot tell whose it is now: decide at the next start, move nothing. */
			log_warning("partition %s: volumes/%s has no record and its index entry is unreadable (%s); left "
				    "for the next start", pname, de->d_name, errno_str(r));
	}
	if (d)
		closedir(d);
	/* Imports are never committed where they are written: whatever is there was abandoned. */
	if (fs->imports_fd >= 0)
		(void)dir_foreach_name(fs->imports_fd, trash_import, &(TrashImport){ m, fs, info->uuid });
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
		/*
		 * Volumes this host's index placed there: read their records now (or
		 * later, if one is busy); and the snapshots of every volume there.
		 */
		registry_read_lock(m->reg);
		for (size_t k = 0; k < registry_size_locked(m->reg); k++) {
			Volume *v = registry_at_locked(m->reg, k);
			Volume **ns;
			if (v->part != parts[i] || v->corrupt)
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
				/* Its snapshots came with the disk; what a crash left is settled at the next start. */
				if (!stale[k]->index_only && !stale[k]->removed && !stale[k]->corrupt)
					manager_snapshot_load(m, stale[k], fs, false);
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

/* Whether @name is loaded from a record (then its entry is settled, before recovery) or not (after it). */
static bool index_entry_registered(const char *name, void *userdata)
{
	Manager *m = userdata;
	Volume *v;

	registry_write_lock(m->reg);
	v = registry_find_locked(m->reg, name);
	if (v)
		v->indexed = true;
	registry_unlock(m->reg);
	return v != NULL;
}

static bool index_entry_unregistered(const char *name, void *userdata)
{
	Manager *m = userdata;
	bool found;

	registry_read_lock(m->reg);
	found = registry_find_locked(m->reg, name) != NULL;
	registry_unlock(m->reg);
	return !found;
}

/*
 * A Create or Remove interrupted on the record side of its commit point left
 * the record and a pending or removing entry: the volume stands, and so must
 * its entry (a later loss of the record must not read as "never committed").
 */
static int settle_index_entry(const char *name, Volume *idx, const char *err, void *userdata)
{
	Manager *m = userdata;
	_cleanup_(volume_unrefp) Volume *reg = registry_lookup(m->reg, name);

	if (!idx || !reg || idx->index_state == VOLUME_INDEX_COMMITTED || !streq(reg->partition_uuid, idx->partition_uuid))
		return 0;
	log_info("volume %s: its %s was interrupted %s its record was written; the volume stays, its index entry is "
		 "marked committed", name, idx->index_state == VOLUME_INDEX_PENDING ? "create" : "remove",
		 idx->index_state == VOLUME_INDEX_PENDING ? "after" : "before");
	if (store_save_index(m->store, idx, VOLUME_INDEX_COMMITTED) < 0)
		log_error("volume %s: cannot mark its index entry committed; tried again at the next start", name);
	return 0;
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
				/* Its directory could not be moved yet: the entry says where it may go, next time. */
				log_warning("volume %s: directory without record still on partition UUID %s; keeping the "
					    "index entry until it is moved", name, info.uuid);
				return 0;
			}
			if (v->index_state == VOLUME_INDEX_COMMITTED)
				log_warning("volume %s: committed but no record on partition UUID %s (see the quarantine "
					    "there); dropping its index entry", name, info.uuid);
			else
				log_info("volume %s: dropping stale index entry (no record on partition UUID %s)", name,
					 info.uuid);
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
				: bind_entry_matches(&mounts[k], v->name, info.dev, bind_flags(v->opts, info.read_only, v->grants_unconfirmed)))) {
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

/* Which volumes of a partition have a snapshot directory: listed once per partition at start. */
typedef struct SnapListing {
	Partition *part;
	char **names; /* sorted */
	size_t n;
	bool listed; /* false: the listing failed, every volume is looked at */
} SnapListing;

static int cmp_name_key(const void *key, const void *elem)
{
	return strcmp(*(const char *const *)key, *(char *const *)elem);
}

static SnapListing *snap_listings(Manager *m, size_t *ret_n)
{
	size_t n = pool_size(m->pool);
	SnapListing *l = calloc(n ? n : 1, sizeof(*l));

	*ret_n = l ? n : 0;
	for (size_t i = 0; l && i < n; i++) {
		PartitionFs *fs;

		l[i].part = pool_get(m->pool, i);
		fs = partition_fs_get(m->pool, l[i].part);
		l[i].listed = fs && snapstore_volume_names(fs, &l[i].names, &l[i].n) == 0;
		partition_fs_put(fs);
	}
	return l;
}

static bool may_have_snapshots(const SnapListing *l, size_t n, const Volume *v)
{
	const char *key = v->name;

	for (size_t i = 0; i < n; i++)
		if (l[i].part == v->part)
			return !l[i].listed ||
			       (l[i].n > 0 && bsearch(&key, l[i].names, l[i].n, sizeof(char *), cmp_name_key));
	return true;
}

static void snap_listings_free(SnapListing *l, size_t n)
{
	for (size_t i = 0; l && i < n; i++)
		names_free(l[i].names, l[i].n);
	free(l);
}

int manager_start(Manager *m, char **reterr_msg)
{
	SnapListing *snaps;
	size_t n_snaps;
	int r;

#if defined(NVMEVOL_TEST_HOOKS) && NVMEVOL_TEST_HOOKS
	{
		/* Tests stretch start-up (as 100,000 records would) to see what is answered meanwhile. */
		const char *e = getenv("NVMEVOL_TEST_START_PAUSE_MS");
		if (e)
			usleep((useconds_t)atoi(e) * 1000);
	}
#endif
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
	r = pool_check_held_elsewhere(m->pool, reterr_msg);
	if (r < 0)
		return r;
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
	/* Before recovery starts the trash worker: the entries of volumes loaded from their records. */
	r = store_load_index_unsettled(m->store, index_entry_registered, settle_index_entry, m);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot read the state in %s: %s", m->cfg->state_dir, errno_str(r));
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
	/* After the directories: an evacuation's uncommitted copy went to the trash with its pending entry. */
	manager_evacuate_recover(m);

	r = store_load_index(m->store, index_entry_unregistered, load_index_entry, m);
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
	snaps = snap_listings(m, &n_snaps);
	for (size_t i = 0; i < registry_count(m->reg); i++) {
		Volume *v;
		PartitionFs *fs;
		bool changed = false;

		registry_read_lock(m->reg);
		v = volume_ref(registry_at_locked(m->reg, i));
		registry_unlock(m->reg);
		fs = v->index_only || v->corrupt ? NULL : partition_fs_get(m->pool, v->part);
		if (fs && !v->indexed && store_save_index(m->store, v, VOLUME_INDEX_COMMITTED) < 0)
			log_error("volume %s: cannot write its index entry; Get will not know it if its partition goes missing",
				  v->name);
		if (fs && sizelimit_repair(&m->projids, m->reg, fs, v, &changed) == 0 && changed)
			(void)store_save_record(fs, v);
		if (fs && may_have_snapshots(snaps, n_snaps, v))
			manager_snapshot_load(m, v, fs, !fs->read_only);
		partition_fs_put(fs);
		volume_unref(v);
	}
	/* A full receive's marked snapshot whose volume was never committed (manager-receive.c): deleted. */
	for (size_t i = 0; i < n_snaps; i++) {
		PartitionFs *fs = snaps[i].listed ? partition_fs_get(m->pool, snaps[i].part) : NULL;

		for (size_t j = 0; fs && j < snaps[i].n; j++) {
			_cleanup_(volume_unrefp) Volume *v = registry_lookup(m->reg, snaps[i].names[j]);
			bool shadowed;

			registry_read_lock(m->reg);
			shadowed = registry_has_shadow_locked(m->reg, snaps[i].names[j], snaps[i].part);
			registry_unlock(m->reg);
			if (!(v && v->part == snaps[i].part) && !shadowed)
				manager_snapshot_drop_received(m, snaps[i].part, fs, snaps[i].names[j]);
		}
		partition_fs_put(fs);
	}
	snap_listings_free(snaps, n_snaps);

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
