/* SPDX-License-Identifier: MIT */
/*
 * The admin operations that change a volume after create (resize, set,
 * release) or bring an old index in (import), over registry, store, pool,
 * binds and size limits. Each runs with the volume's op_lock held and
 * commits through the store: the record on the partition first (the
 * authority), then the kernel, then the index; a failure puts the record back.
 * A grant of suid/dev is the exception: this host's index (where the grant
 * lives, volume.h) is written before the record.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "manager/manager-internal.h"
#include "pool/sizelimit.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/log.h"
#include "volume/options-intern.h"
#include "util/macro.h"
#include "util/strutil.h"

static const char *const resize_keys[] = { "size", "inodes", NULL };
static const char *const set_keys[] = { "selftest", "min_write_mbps", "min_read_mbps", "min_iops", "max_p99_ms",
					"suid", "dev", NULL };

/*
 * The options @v would have after the request's @changes to @keys, and a
 * reference to its partition if an admin change may write there; else an Err
 * that says why.
 */
static int change_begin(Manager *m, Volume *v, const json_t *changes, const char *const *keys, VolumeOptions *ret_want,
			PartitionFs **ret_fs, char **reterr_msg)
{
	char pname[PARTITION_NAME_MAX];
	PartitionInfo info;
	PartitionFs *fs;
	int r;

	r = volume_options_change(v->opts, changes, keys, ret_want, reterr_msg);
	if (r < 0)
		return r;
	if (v->corrupt)
		return errmsg_set(reterr_msg, -EUCLEAN, "volume %s has an unreadable record (%s); nothing can be changed",
				  v->name, v->corrupt);
	fs = partition_fs_get(m->pool, v->part);
	partition_snapshot(m->pool, v->part, &info);
	partition_display_name(&info, pname, sizeof(pname));
	if (fs && v->index_only && manager_refresh_index_only(m, v, fs) < 0) {
		partition_fs_put(fs);
		return errmsg_set(reterr_msg, -ENOENT, "no such volume: %s", v->name);
	}
	if (!fs)
		return errmsg_set(reterr_msg, -ENODEV,
				  "volume %s is on partition %s (UUID %s), which is not available (%s); attach it first",
				  v->name, pname, info.uuid, info.problem[0] ? info.problem : "not detected");
	if (fs->read_only || !info.adopted) {
		partition_fs_put(fs);
		return errmsg_set(reterr_msg, -EROFS, "volume %s is on partition %s, which is read-only until adopted: run "
				  "'nvmevol partition adopt %s' first", v->name, pname, info.uuid);
	}
	*ret_fs = fs;
	return 0;
}

/*
 * Writes @v's record with @opts; on failure @v keeps its old options. With
 * @grant (an admin set suid/dev), this host's index entry records the grant,
 * and is written first: a record that grants more than the index is bound
 * without it, never the other way round.
 */
static int commit_options(Manager *m, Volume *v, PartitionFs *fs, const VolumeOptions *opts, bool grant,
			  char **reterr_msg)
{
	const VolumeOptions *old, *new = volume_options_intern(opts);
	bool old_unconfirmed = v->grants_unconfirmed;
	int r = 0;

	if (!new)
		return errmsg_set(reterr_msg, -ENOMEM, "out of memory");
	registry_write_lock(m->reg);
	old = v->opts;
	v->opts = new;
	if (grant)
		v->grants_unconfirmed = false;
	registry_unlock(m->reg);
	if (grant && (r = store_save_index(m->store, v, VOLUME_INDEX_COMMITTED)) < 0)
		r = errmsg_set(reterr_msg, r, "cannot write the index entry of volume %s in %s: %s", v->name,
			       store_path(m->store), errno_str(r));
	if (r == 0 && (r = store_save_record(fs, v)) < 0)
		r = errmsg_set(reterr_msg, r, "cannot write the record of volume %s: %s", v->name, errno_str(r));
	if (r < 0) {
		registry_write_lock(m->reg);
		v->opts = old;
		v->grants_unconfirmed = old_unconfirmed;
		registry_unlock(m->reg);
		volume_options_release(new);
		if (grant)
			(void)store_save_index(m->store, v, VOLUME_INDEX_COMMITTED);
		return r;
	}
	/* Else the index only matters while the partition is missing; a stale one is corrected at the next start. */
	if (!grant && store_save_index(m->store, v, VOLUME_INDEX_COMMITTED) < 0)
		log_warning("volume %s: cannot update its index entry (corrected at the next start)", v->name);
	volume_options_release(old);
	return 0;
}

static json_t *limits_json(const VolumeOptions *o)
{
	return json_pack("{s:I,s:I}", "size_bytes", (json_int_t)o->size_bytes, "inodes", (json_int_t)o->inodes);
}

/* What an admin operation gets (the request's changes or expectations) and gives back. */
typedef struct AdminArgs {
	const json_t *in;
	json_t *result;
} AdminArgs;

/* Runs @fn on volume @name under its op_lock; its result goes to *ret_result. */
static int run_admin(Manager *m, const char *name, ManagerVolumeFn fn, const json_t *in, json_t **ret_result,
		     char **reterr_msg)
{
	AdminArgs a = { .in = in };
	int r = manager_run_on_volume(m, name, false, fn, &a, reterr_msg);

	if (r == 0)
		*ret_result = a.result;
	else
		json_decref(a.result);
	return r;
}

/* ---- resize ---- */

/*
 * Gives @v a project ID if it has none (recorded before any inode carries it,
 * so that it is never handed out twice), and tags its files with it if the
 * volume had no limits until now: files written while it was unlimited may
 * not carry it (never tagged, or a walk that an error stopped half-way).
 */
static int ensure_project(Manager *m, Volume *v, PartitionFs *fs, int dirfd, uint64_t *ret_tagged, char **reterr_msg)
{
	uint32_t id;
	int r;

	*ret_tagged = 0;
	if (sizelimit_wanted(v->opts))
		return 0; /* limited since create (PROJINHERIT from the start) or since a complete walk */
	if (!v->projid) {
		r = sizelimit_reserve_id(&m->projids, m->reg, v->part, fs, &id);
		if (r == -ENOSPC)
			return errmsg_set(reterr_msg, r, "no free XFS project ID on the partition of volume %s", v->name);
		if (r < 0)
			return errmsg_set(reterr_msg, r, "cannot reserve an XFS project ID on the partition of volume %s "
					  "(reading the IDs in use, or clearing the free ID's old limit): %s", v->name,
					  errno_str(r));
		registry_write_lock(m->reg);
		v->projid = id;
		registry_unlock(m->reg);
		r = store_save_record(fs, v);
		if (r < 0) {
			registry_write_lock(m->reg);
			v->projid = 0;
			registry_unlock(m->reg);
			sizelimit_release(&m->projids, v->part, fs, id);
			return errmsg_set(reterr_msg, r, "cannot write the record of volume %s: %s", v->name, errno_str(r));
		}
		sizelimit_commit_id(&m->projids, v->part, id); /* the registry and the record carry it */
	}
	log_info("volume %s: counting its usage under XFS project %u (walking its files)", v->name, v->projid);
	return sizelimit_tag_tree(fs, dirfd, v->projid, ret_tagged, reterr_msg);
}

static int resize_fn(Manager *m, Volume *v, void *userdata, char **reterr_msg)
{
	AdminArgs *a = userdata;
	_cleanup_close_ int dirfd = -EBADF;
	VolumeOptions want, before = *v->opts;
	uint64_t used_bytes = 0, used_inodes = 0, tagged = 0;
	char have[32], asked[32];
	PartitionFs *fs;
	int r;

	r = change_begin(m, v, a->in, resize_keys, &want, &fs, reterr_msg);
	if (r < 0)
		return r;
	if (!fs->quota && sizelimit_wanted(&want)) {
		r = errmsg_set(reterr_msg, -EOPNOTSUPP,
			       "the partition of volume %s is mounted without XFS project quota, so no size or inode limit "
			       "can be enforced there (a kernel without CONFIG_XFS_QUOTA?)", v->name);
		goto out;
	}
	if (!fs->quota) {
		/* Removing limits that were never enforced: only the record changes. */
		r = commit_options(m, v, fs, &want, false, reterr_msg);
		goto done;
	}
	dirfd = openat(fs->volumes_fd, v->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0) {
		r = errmsg_set(reterr_msg, negative_errno(), "cannot open the directory of volume %s: %s", v->name,
			       errno_str(errno));
		goto out;
	}
	r = ensure_project(m, v, fs, dirfd, &tagged, reterr_msg);
	if (r < 0)
		goto out;
	r = sizelimit_usage(fs, v->projid, &used_bytes, &used_inodes);
	if (r < 0) {
		r = errmsg_set(reterr_msg, r, "cannot read the usage of volume %s: %s", v->name, errno_str(r));
		goto out;
	}
	/* Never below what is already there: the volume would be full at once, and stay so. */
	if (want.size_bytes && used_bytes > want.size_bytes) {
		format_size(want.size_bytes, asked, sizeof(asked));
		r = errmsg_set(reterr_msg, -ENOSPC,
			       "volume %s uses %llu bytes (%.1f MiB), more than size=%s: free space in the volume first, or "
			       "choose a size of at least %llu bytes",
			       v->name, (unsigned long long)used_bytes, used_bytes / 1048576.0, asked,
			       (unsigned long long)used_bytes);
		goto out;
	}
	if (want.inodes && used_inodes > want.inodes) {
		snprintf(have, sizeof(have), "%llu", (unsigned long long)used_inodes);
		r = errmsg_set(reterr_msg, -ENOSPC,
			       "volume %s has %s files and directories, more than inodes=%llu: delete some first, or choose "
			       "at least %s",
			       v->name, have, (unsigned long long)want.inodes, have);
		goto out;
	}
	/* The record is the commit point; a crash before the kernel has the limits is repaired at start. */
	r = commit_options(m, v, fs, &want, false, reterr_msg);
	if (r < 0)
		goto out;
	r = sizelimit_set(fs, v->projid, want.size_bytes, want.inodes, reterr_msg);
	if (r < 0) {
		_cleanup_free_ char *ignored = NULL;
		(void)commit_options(m, v, fs, &before, false, &ignored);
		goto out;
	}
done:
	if (r == 0) {
		a->result = json_pack("{s:s,s:o,s:o,s:{s:I,s:I},s:I,s:I}", "name", v->name, "before", limits_json(&before),
				      "after", limits_json(&want), "usage", "bytes", (json_int_t)used_bytes, "inodes",
				      (json_int_t)used_inodes, "project_id", (json_int_t)v->projid, "tagged",
				      (json_int_t)tagged);
		if (!a->result)
			r = -ENOMEM;
	}
out:
	partition_fs_put(fs);
	return r;
}

int manager_resize(Manager *m, const char *name, const json_t *changes, json_t **ret_result, char **reterr_msg)
{
	return run_admin(m, name, resize_fn, changes, ret_result, reterr_msg);
}

/* ---- set (self-test policy and thresholds, suid and dev) ---- */

static int set_fn(Manager *m, Volume *v, void *userdata, char **reterr_msg)
{
	AdminArgs *a = userdata;
	VolumeOptions want, before = *v->opts;
	bool grant = json_object_get(a->in, "suid") || json_object_get(a->in, "dev");
	PartitionFs *fs;
	int r;

	r = change_begin(m, v, a->in, set_keys, &want, &fs, reterr_msg);
	if (r < 0)
		return r;
	if (grant && v->mounted) {
		partition_fs_put(fs);
		return errmsg_set(reterr_msg, -EBUSY,
				  "volume %s is mounted: suid and dev apply to its bind, which is made at its first mount; "
				  "set them while no container uses it", v->name);
	}
	/* Of a record this host never granted, an admin's grant keeps only what it names. */
	if (grant && v->grants_unconfirmed) {
		if (!json_object_get(a->in, "suid"))
			want.allow_suid = false;
		if (!json_object_get(a->in, "dev"))
			want.allow_devices = false;
	}
	r = commit_options(m, v, fs, &want, grant, reterr_msg);
	partition_fs_put(fs);
	if (r < 0)
		return r;
	/* Takes effect at the next first mount (the self-test runs, and the bind is made, when the count goes from 0 to 1). */
	a->result = json_pack("{s:s,s:o,s:o}", "name", v->name, "before", volume_options_to_json(&before), "after",
			      volume_options_to_json(&want));
	return a->result ? 0 : -ENOMEM;
}

int manager_set_options(Manager *m, const char *name, const json_t *changes, json_t **ret_result, char **reterr_msg)
{
	return run_admin(m, name, set_fn, changes, ret_result, reterr_msg);
}

/* ---- release (clear mount counts left too high) ---- */

static json_t *counts_json(const Volume *v)
{
	json_t *j = json_object();

	for (size_t i = 0; j && i < v->n_mounts; i++)
		json_object_set_new(j, v->mounts[i].id, json_integer(v->mounts[i].count));
	return j;
}

static int release_fn(Manager *m, Volume *v, void *userdata, char **reterr_msg)
{
	AdminArgs *a = userdata;
	_cleanup_(json_decrefp) json_t *before = NULL;
	bool was_mounted;
	unsigned total;
	int r;

	registry_read_lock(m->reg);
	before = counts_json(v);
	total = volume_mount_total(v);
	was_mounted = v->mounted;
	registry_unlock(m->reg);
	if (!before)
		return -ENOMEM;
	/*
	 * The caller checked Docker and the host's mount namespaces against these
	 * counts: a Mount or Unmount since then makes that check stale.
	 */
	if (!json_equal(before, (json_t *)a->in))
		return errmsg_set(reterr_msg, -ESTALE,
				  "the mount counts of volume %s changed while they were being checked (a container started "
				  "or stopped); run the release again", v->name);
	if (total == 0 && !was_mounted) {
		a->result = json_pack("{s:s,s:O,s:i,s:b}", "name", v->name, "cleared", before, "total_before", 0,
				      "unmounted", false);
		return a->result ? 0 : -ENOMEM;
	}
	/* Counts first (the commit point): a crash before the unmount leaves a bind with no count, which start-up removes. */
	registry_write_lock(m->reg);
	volume_mounts_clear(v);
	registry_unlock(m->reg);
	r = store_save_mounts(m->store, v);
	if (r < 0) {
		const char *id;
		json_t *n;

		registry_write_lock(m->reg);
		json_object_foreach(before, id, n)
			for (json_int_t k = 0; k < json_integer_value(n); k++)
				(void)volume_mount_add(v, id);
		registry_unlock(m->reg);
		/* The delete may have happened (a failed fsync after it): write the counts back. */
		(void)store_save_mounts(m->store, v);
		return errmsg_set(reterr_msg, r, "cannot write the mount counts of volume %s: %s", v->name, errno_str(r));
	}
	if (was_mounted) {
		r = manager_unbind_volume(m, v);
		if (r < 0)
			return errmsg_set(reterr_msg, r, "volume %s: counts cleared, but its bind could not be unmounted (%s); "
					  "it is removed at the next plugin start", v->name, errno_str(r));
	}
	a->result = json_pack("{s:s,s:O,s:i,s:b}", "name", v->name, "cleared", before, "total_before", (int)total,
			      "unmounted", was_mounted);
	return a->result ? 0 : -ENOMEM;
}

int manager_release(Manager *m, const char *name, const json_t *expect, json_t **ret_result, char **reterr_msg)
{
	if (!json_is_object(expect))
		return errmsg_set(reterr_msg, -EINVAL, "'expect' must be the object of mount IDs and counts that was checked");
	return run_admin(m, name, release_fn, expect, ret_result, reterr_msg);
}

/* ---- import of an index entry from an older state directory ---- */

int manager_import_index(Manager *m, const char *name, const char *buf, size_t len, const char **ret_outcome,
			 char **reterr_msg)
{
	_cleanup_(volume_unrefp) Volume *v = NULL, *known = NULL;
	_cleanup_free_ char *err = NULL;
	Partition *part;
	PartitionInfo info;
	int r;

	*ret_outcome = "invalid";
	if (!volume_name_is_valid(name))
		return errmsg_set(reterr_msg, -EINVAL, "invalid volume name");
	r = volume_record_parse(buf, len, &v, &err);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "unreadable index entry: %s", err ? err : errno_str(r));
	if (!streq(v->name, name))
		return errmsg_set(reterr_msg, -EINVAL, "the index entry of %s names volume %s", name, v->name);

	pthread_mutex_lock(&m->create_lock);
	known = registry_lookup(m->reg, name);
	if (known) {
		*ret_outcome = "known";
		r = 0;
		goto out;
	}
	part = pool_find_uuid(m->pool, v->partition_uuid);
	if (part) {
		partition_snapshot(m->pool, part, &info);
		if (info.present) {
			/* Its partition is here and has no record of it (else it would be known): removed since. */
			*ret_outcome = "stale";
			r = 0;
			goto out;
		}
	}
	r = store_save_index(m->store, v, VOLUME_INDEX_COMMITTED);
	if (r < 0) {
		r = errmsg_set(reterr_msg, r, "cannot write the index entry of %s: %s", name, errno_str(r));
		goto out;
	}
	v->state = VOLUME_READY;
	r = manager_register_index_only(m, v);
	if (r < 0) {
		(void)store_delete_index(m->store, name);
		r = errmsg_set(reterr_msg, r, "cannot register volume %s: %s", name, errno_str(r));
		goto out;
	}
	*ret_outcome = "imported";
out:
	pthread_mutex_unlock(&m->create_lock);
	return r;
}
