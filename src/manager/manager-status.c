/* SPDX-License-Identifier: MIT */
/* What `docker volume inspect` shows: the Volume object of Get, Status included. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "pool/sizelimit.h"
#include "manager/manager-internal.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/macro.h"
#include "util/strutil.h"

const char *manager_volume_condition(const Volume *v, const PartitionInfo *info)
{
	if (v->corrupt)
		return "record-unreadable";
	if (!info->present)
		return "partition-missing";
	if (v->fence && !v->mounted)
		return "fenced";
	return v->mounted ? "mounted" : "ready";
}

/* "duplicates": the other devices that hold this partition's XFS UUID (pool.h's duplicate rule), if any. */
static void add_duplicates(json_t *p, const PartitionInfo *info)
{
	json_t *arr;

	if (!info->duplicates[0])
		return;
	arr = json_array();
	for (const char *c = info->duplicates; arr && *c;) {
		size_t k = strcspn(c, ",");

		json_array_append_new(arr, json_stringn(c, k));
		c += k;
		c += strspn(c, ", ");
	}
	json_object_set_new(p, "duplicates", arr);
}

static json_t *partition_json(const Volume *v, const PartitionInfo *info, PartitionFs *fs)
{
	char label[PARTITION_NAME_MAX];
	json_t *p = json_object();

	/* The live label when the partition is known to this run, else the one the record remembers. */
	label_escape(info->label[0] ? info->label : v->partition_label, label, sizeof(label));
	json_object_set_new(p, "label", json_string(label));
	json_object_set_new(p, "uuid", json_string(v->partition_uuid));
	if (info->device[0])
		json_object_set_new(p, "device", json_string(info->device));
	add_duplicates(p, info);
	json_object_set_new(p, "present", json_boolean(info->present));
	if (!info->present) {
		json_object_set_new(p, "problem", json_string(info->problem[0] ? info->problem : "not detected"));
		return p;
	}
	json_object_set_new(p, "adopted", json_boolean(info->adopted));
	if (!info->adopted)
		json_object_set_new(p, "problem", json_string("appeared after the plugin started: read-only until "
							      "'nvmevol partition adopt' or a plugin restart"));
	json_object_set_new(p, "mount_options", json_string(info->verified_options));
	json_object_set_new(p, "project_quota", json_boolean(info->quota));
	manager_cordon_add_status(info, p);
	if (fs) {
		uint64_t free_b = 0, total_b = 0;
		if (partition_fs_free_bytes(fs, &free_b, &total_b) == 0) {
			json_object_set_new(p, "size_bytes", json_integer((json_int_t)total_b));
			json_object_set_new(p, "free_bytes", json_integer((json_int_t)free_b));
		}
	}
	return p;
}

/* Why the suid/dev that @v's record allows are not on its bind (see bind_flags()), or nothing. */
static void add_suppressed_grants(json_t *status, const Volume *v, const PartitionInfo *info)
{
	_cleanup_free_ char *why = NULL;
	const char *suid = v->opts.allow_suid ? " suid=true" : "", *dev = v->opts.allow_devices ? " dev=true" : "";
	int r;

	if (!(v->opts.allow_suid || v->opts.allow_devices) || v->corrupt)
		return;
	if (info->present && !info->adopted)
		r = asprintf(&why, "partition not adopted: bound nosuid,nodev; run 'nvmevol partition adopt %s', then "
			     "'nvmevol volume set %s%s%s' to allow", info->uuid, v->name, suid, dev);
	else if (v->grants_unconfirmed)
		r = asprintf(&why, "record not written by this host (no index entry of this host grants%s%s): bound "
			     "nosuid,nodev; run 'nvmevol volume set %s%s%s' to allow", suid, dev, v->name, suid, dev);
	else
		return;
	if (r >= 0)
		json_object_set_new(status, "suid_dev_suppressed", json_string(why));
}

static void add_owner(json_t *status, const char *name, PartitionFs *fs)
{
	struct stat st;
	char buf[32];

	/* The real owner and mode, not just what was asked: the container may have changed them. */
	if (!fs || fs->volumes_fd < 0 || fstatat(fs->volumes_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISDIR(st.st_mode))
		return;
	snprintf(buf, sizeof(buf), "%u:%u", (unsigned)st.st_uid, (unsigned)st.st_gid);
	json_object_set_new(status, "owner", json_string(buf));
	snprintf(buf, sizeof(buf), "%04o", (unsigned)(st.st_mode & 07777));
	json_object_set_new(status, "mode", json_string(buf));
}

static void add_conflict(Volume *shadow, void *userdata)
{
	json_t *arr = userdata;

	json_array_append_new(arr, json_pack("{s:s,s:s}", "partition_uuid", shadow->partition_uuid, "message",
					     "a volume of the same name exists on this partition too; it is not served "
					     "while this one is (rename or remove one copy, e.g. after detaching a disk)"));
}

json_t *manager_volume_json(Manager *m, Volume *v)
{
	json_t *j = json_object(), *status = NULL, *conflicts = json_array(), *quota;
	char stamp[40], path[PATH_MAX];
	VolumeOptions opts;
	uint32_t projid;
	PartitionInfo info;
	PartitionFs *fs;

	if (!j || !conflicts) {
		json_decref(j);
		json_decref(conflicts);
		return NULL;
	}
	/* Pool first, registry second: the pool mutex is never held while taking the registry lock. */
	partition_snapshot(m->pool, v->part, &info);
	fs = partition_fs_get(m->pool, v->part);

	registry_read_lock(m->reg);
	json_object_set_new(j, "Name", json_string(v->name));
	if (v->mounted) {
		bind_path(m->binds, v->name, path, sizeof(path));
		json_object_set_new(j, "Mountpoint", json_string(path));
	}
	if (v->created_at > 0) {
		format_rfc3339(v->created_at, stamp, sizeof(stamp));
		json_object_set_new(j, "CreatedAt", json_string(stamp));
	}
	status = json_object();
	json_object_set_new(j, "Status", status);
	json_object_set_new(status, "state", json_string(manager_volume_condition(v, &info)));
	if (v->corrupt)
		json_object_set_new(status, "problem", json_string(v->corrupt));
	json_object_set_new(status, "partition", partition_json(v, &info, fs));
	json_object_set_new(status, "options", volume_options_to_json(&v->opts));
	json_object_set_new(status, "created_at", json_string(v->created_at > 0 ? stamp : ""));
	json_object_set_new(status, "mount_count", json_integer(volume_mount_total(v)));
	if (v->mounted && v->bind_options)
		json_object_set_new(status, "mount_options", json_string(v->bind_options));
	add_suppressed_grants(status, v, &info);
	if (v->selftest)
		json_object_set_new(status, "selftest", json_deep_copy(v->selftest));
	manager_clone_add_status(v, status);
	manager_fence_add_status(v, status);
	manager_snapshot_add_status(v, status);
	registry_foreach_shadow_locked(m->reg, v->name, add_conflict, conflicts);
	opts = v->opts;
	projid = v->projid;
	registry_unlock(m->reg);
	manager_health_add_status(m, v->part, &opts, json_object_get(status, "partition"));

	/* I/O outside the registry lock: a stat of the directory, one quotactl. */
	add_owner(status, v->name, fs);
	quota = sizelimit_status(fs, &opts, projid);
	if (quota)
		json_object_set_new(status, "quota", quota);
	if (json_array_size(conflicts) > 0)
		json_object_set_new(status, "conflicts", conflicts);
	else
		json_decref(conflicts);
	partition_fs_put(fs);
	return j;
}

/* ---- admin: the pool and every volume, and one volume in detail ---- */

#define QUARANTINE_LISTED_MAX 100

typedef struct QuarantineList {
	json_t *entries; /* the first QUARANTINE_LISTED_MAX */
	size_t n;
} QuarantineList;

static int add_quarantined(const char *qname, void *userdata)
{
	QuarantineList *q = userdata;
	const char *dot = strrchr(qname, '.');
	char name[VOLUME_NAME_MAX + 1] = "";

	if (q->n++ >= QUARANTINE_LISTED_MAX)
		return 0;
	/* "<name>.<unix time>": the directory volumes/<name> was, and when it was moved. */
	if (dot && (size_t)(dot - qname) < sizeof(name))
		snprintf(name, sizeof(name), "%.*s", (int)(dot - qname), qname);
	return json_array_append_new(q->entries, json_pack("{s:s,s:s}", "entry", qname, "was", name)) < 0 ? -ENOMEM : 0;
}

/*
 * What start-up kept instead of deleting: directories without a record. The
 * admin decides; nvmevol never deletes them.
 */
static json_t *quarantine_json(const Partition *part, PartitionFs *fs)
{
	_cleanup_free_ char *how = NULL;
	QuarantineList q = { .entries = json_array() };

	if (!q.entries || fs->quarantine_fd < 0 || dir_foreach_name(fs->quarantine_fd, add_quarantined, &q) < 0 ||
	    q.n == 0 ||
	    asprintf(&how,
		     "directories found at start without a volume record, kept with their data in %s/nvmevol/quarantine. "
		     "To restore one as volume NAME: put its record back in nvmevol/meta/NAME.json (from a backup) and "
		     "move the directory back to nvmevol/volumes/NAME, then restart the plugin; or create a new volume "
		     "and copy the data into it. Delete the directory once it is not needed",
		     part->mountpoint) < 0) {
		json_decref(q.entries);
		return NULL;
	}
	return json_pack("{s:I,s:o,s:s}", "count", (json_int_t)q.n, "entries", q.entries, "how_to_restore", how);
}

static json_t *pool_partition_json(Manager *m, Partition *part, size_t n_volumes)
{
	char label[PARTITION_NAME_MAX];
	PartitionInfo info;
	PartitionFs *fs;
	json_t *p = json_object(), *st, *q;

	if (!p)
		return NULL;
	partition_snapshot(m->pool, part, &info);
	label_escape(info.label, label, sizeof(label));
	json_object_set_new(p, "uuid", json_string(info.uuid));
	json_object_set_new(p, "label", json_string(label));
	json_object_set_new(p, "device", json_string(info.device));
	add_duplicates(p, &info);
	json_object_set_new(p, "present", json_boolean(info.present));
	json_object_set_new(p, "adopted", json_boolean(info.adopted));
	json_object_set_new(p, "read_only", json_boolean(info.read_only));
	json_object_set_new(p, "project_quota", json_boolean(info.quota));
	json_object_set_new(p, "volumes", json_integer((json_int_t)n_volumes));
	manager_cordon_add_status(&info, p);
	if (info.present)
		json_object_set_new(p, "mount_options", json_string(info.verified_options));
	if (info.problem[0])
		json_object_set_new(p, "problem", json_string(info.problem));
	else if (info.present && !info.adopted)
		json_object_set_new(p, "problem", json_string("appeared after the plugin started: read-only until "
							      "'nvmevol partition adopt' or a plugin restart"));
	fs = partition_fs_get(m->pool, part);
	if (fs) {
		uint64_t free_b = 0, total_b = 0;
		if (partition_fs_free_bytes(fs, &free_b, &total_b) == 0) {
			json_object_set_new(p, "size_bytes", json_integer((json_int_t)total_b));
			json_object_set_new(p, "free_bytes", json_integer((json_int_t)free_b));
		}
		q = quarantine_json(part, fs);
		if (q)
			json_object_set_new(p, "quarantine", q);
		partition_fs_put(fs);
	}
	/* Health as far as nvmevol knows it: the last self-test of the partition. */
	st = manager_selftest_partition_json(part);
	if (st)
		json_object_set_new(p, "selftest", st);
	return p;
}

/* The devices the last scan skipped because their probe did not answer: [{"device","since","partition_uuid"?}]. */
static json_t *silent_devices_json(Manager *m)
{
	_cleanup_free_ PoolSilentDevice *silent = NULL;
	size_t n = pool_silent_devices(m->pool, &silent);
	json_t *arr = json_array();

	for (size_t i = 0; arr && i < n; i++) {
		char stamp[40];
		json_t *e;

		format_rfc3339(silent[i].since, stamp, sizeof(stamp));
		e = json_pack("{s:s,s:s}", "device", silent[i].device, "since", stamp);
		if (e && silent[i].partition_uuid[0])
			json_object_set_new(e, "partition_uuid", json_string(silent[i].partition_uuid));
		json_array_append_new(arr, e);
	}
	return arr;
}

json_t *manager_status_json(Manager *m)
{
	json_t *j = json_object(), *parts = json_array(), *vols = json_array();
	Volume **list = NULL;
	size_t n = 0, n_parts = pool_size(m->pool);
	size_t *per_part = calloc(n_parts ? n_parts : 1, sizeof(size_t));

	if (!j || !parts || !vols || !per_part)
		goto fail;
	registry_read_lock(m->reg);
	n = registry_size_locked(m->reg);
	list = calloc(n ? n : 1, sizeof(*list));
	for (size_t i = 0; list && i < n; i++) {
		list[i] = volume_ref(registry_at_locked(m->reg, i));
		for (size_t k = 0; k < n_parts; k++)
			if (pool_get(m->pool, k) == list[i]->part)
				per_part[k]++;
	}
	registry_unlock(m->reg);
	if (!list)
		goto fail;

	for (size_t k = 0; k < n_parts; k++)
		json_array_append_new(parts, pool_partition_json(m, pool_get(m->pool, k), per_part[k]));
	/* Each volume as `docker volume inspect` shows it; I/O outside the registry lock. */
	for (size_t i = 0; i < n; i++) {
		json_array_append_new(vols, manager_volume_json(m, list[i]));
		volume_unref(list[i]);
	}
	free(list);
	free(per_part);
	json_object_set_new(j, "partitions", parts);
	json_object_set_new(j, "volumes", vols);
	json_object_set_new(j, "devices_not_answering", silent_devices_json(m));
	return j;
fail:
	json_decref(j);
	json_decref(parts);
	json_decref(vols);
	free(per_part);
	return NULL;
}

/* What the admin command needs beyond Get: mount IDs, the bind as the kernel shows it, the record's details. */
static json_t *volume_admin_json(Manager *m, Volume *v)
{
	char path[PATH_MAX], dev[32], root[VOLUME_NAME_MAX + 32];
	json_t *a = json_object(), *ids = json_object();
	PartitionInfo info;
	struct stat ns;

	if (!a || !ids) {
		json_decref(a);
		json_decref(ids);
		return NULL;
	}
	partition_snapshot(m->pool, v->part, &info);
	registry_read_lock(m->reg);
	for (size_t i = 0; i < v->n_mounts; i++)
		json_object_set_new(ids, v->mounts[i].id, json_integer(v->mounts[i].count));
	json_object_set_new(a, "project_id", json_integer(v->projid));
	json_object_set_new(a, "index_only", json_boolean(v->index_only));
	json_object_set_new(a, "mounted", json_boolean(v->mounted));
	registry_unlock(m->reg);
	json_object_set_new(a, "mount_ids", ids);
	bind_path(m->binds, v->name, path, sizeof(path));
	json_object_set_new(a, "mountpoint", json_string(path));
	/* The bind as mountinfo shows it anywhere: this device, this root (or below it). */
	if (info.present) {
		snprintf(dev, sizeof(dev), "%u:%u", major(info.dev), minor(info.dev));
		json_object_set_new(a, "dev", json_string(dev));
	}
	bind_root(v->name, root, sizeof(root));
	json_object_set_new(a, "root", json_string(root));
	/* So that a host-side check can tell the plugin's own mount namespace from the others. */
	if (stat("/proc/self/ns/mnt", &ns) == 0)
		json_object_set_new(a, "mount_namespace", json_integer((json_int_t)ns.st_ino));
	return a;
}

int manager_volume_show(Manager *m, const char *name, json_t **ret, char **reterr_msg)
{
	_cleanup_(volume_unrefp) Volume *v = NULL;
	json_t *j, *a;

	if (!volume_name_is_valid(name))
		return errmsg_set(reterr_msg, -EINVAL, "invalid volume name");
	v = registry_lookup(m->reg, name);
	if (!v)
		return errmsg_set(reterr_msg, -ENOENT, "no such volume: %s", name);
	(void)partition_verify(m->pool, v->part);
	j = manager_volume_json(m, v);
	a = volume_admin_json(m, v);
	if (!j || !a || json_object_set_new(j, "Admin", a) < 0) {
		json_decref(j);
		return errmsg_set(reterr_msg, -ENOMEM, "out of memory");
	}
	*ret = j;
	return 0;
}
