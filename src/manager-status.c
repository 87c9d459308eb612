/* SPDX-License-Identifier: MIT */
/* What `docker volume inspect` shows: the Volume object of Get, Status included. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "manager-internal.h"
#include "util/macro.h"

static const char *volume_condition(Manager *m, Volume *v)
{
	if (v->corrupt)
		return "record-unreadable";
	if (!v->part || !v->part->present)
		return "partition-missing";
	if (v->state != VOLUME_READY)
		return volume_state_to_string(v->state);
	return v->mounted ? "mounted" : "ready";
}

static json_t *partition_json(Volume *v)
{
	json_t *p = json_object();
	Partition *part = v->part;

	json_object_set_new(p, "label", json_string(v->partition_label));
	json_object_set_new(p, "uuid", json_string(v->partition_uuid));
	if (part) {
		uint64_t free_b = 0, total_b = 0;

		json_object_set_new(p, "device", json_string(part->device));
		json_object_set_new(p, "present", json_boolean(part->present));
		if (part->present) {
			json_object_set_new(p, "mount_options", json_string(part->verified_options));
			json_object_set_new(p, "project_quota", json_boolean(part->quota));
			if (partition_free_bytes(part, &free_b, &total_b) == 0) {
				json_object_set_new(p, "size_bytes", json_integer((json_int_t)total_b));
				json_object_set_new(p, "free_bytes", json_integer((json_int_t)free_b));
			}
		} else if (part->problem)
			json_object_set_new(p, "problem", json_string(part->problem));
	} else {
		json_object_set_new(p, "present", json_false());
		json_object_set_new(p, "problem", json_string("not detected; is the disk attached?"));
	}
	return p;
}

static void add_owner(json_t *status, Volume *v)
{
	struct stat st;
	char buf[32];

	/* The real owner and mode, not just what was asked: the container may have changed them. */
	if (!v->part || !v->part->present || v->part->volumes_fd < 0 ||
	    fstatat(v->part->volumes_fd, v->name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
		return;
	snprintf(buf, sizeof(buf), "%u:%u", (unsigned)st.st_uid, (unsigned)st.st_gid);
	json_object_set_new(status, "owner", json_string(buf));
	snprintf(buf, sizeof(buf), "%04o", (unsigned)(st.st_mode & 07777));
	json_object_set_new(status, "mode", json_string(buf));
}

json_t *volume_to_api_json(Manager *m, Volume *v, bool with_status)
{
	json_t *j = json_object(), *status, *q;
	char stamp[40], path[PATH_MAX];

	if (!j)
		return NULL;
	pthread_rwlock_rdlock(&m->reg_lock);
	json_object_set_new(j, "Name", json_string(v->name));
	if (v->mounted) {
		mountpoint_of(m, v->name, path, sizeof(path));
		json_object_set_new(j, "Mountpoint", json_string(path));
	}
	if (v->created_at > 0) {
		format_rfc3339(v->created_at, stamp, sizeof(stamp));
		json_object_set_new(j, "CreatedAt", json_string(stamp));
	}
	if (with_status) {
		status = json_object();
		json_object_set_new(j, "Status", status);
		json_object_set_new(status, "state", json_string(volume_condition(m, v)));
		if (v->corrupt)
			json_object_set_new(status, "problem", json_string(v->corrupt));
		json_object_set_new(status, "partition", partition_json(v));
		json_object_set_new(status, "options", volume_options_to_json(&v->opts));
		add_owner(status, v);
		json_object_set_new(status, "created_at", json_string(v->created_at > 0 ? stamp : ""));
		json_object_set_new(status, "mount_count", json_integer(volume_mount_total(v)));
		if (v->mounted && v->bind_options)
			json_object_set_new(status, "mount_options", json_string(v->bind_options));
		if (v->selftest)
			json_object_set_new(status, "selftest", json_deep_copy(v->selftest));
	}
	pthread_rwlock_unlock(&m->reg_lock);
	if (with_status && (q = quota_status(m, v)))
		json_object_set_new(json_object_get(j, "Status"), "quota", q);
	return j;
}
