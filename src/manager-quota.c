/* SPDX-License-Identifier: MIT */
/* Glue between volumes and XFS project quotas: size= and inodes= limits. */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "manager-internal.h"
#include "quota.h"
#include "util/log.h"
#include "util/fs-util.h"
#include "util/macro.h"
#include "util/strutil.h"

static bool wants_quota(const VolumeOptions *o)
{
	return o->size_bytes > 0 || o->inodes > 0;
}

int quota_check_create(Manager *m, Partition *part, const VolumeOptions *o, char **reterr_msg)
{
	if (!wants_quota(o) || part->quota)
		return 0;
	return errmsg_set(reterr_msg, -EOPNOTSUPP,
		       "size and inodes need XFS project quota, but partition %s (UUID %s) is mounted without it: "
		       "the kernel refused the prjquota mount option (a kernel without CONFIG_XFS_QUOTA?). "
		       "Create the volume without size/inodes, or run on a kernel with XFS quota support",
		       part->label, part->uuid);
}

static int push_id(uint32_t **ids, size_t *n, size_t *cap, uint32_t id)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 64;
		uint32_t *ni = realloc(*ids, c * sizeof(**ids));
		if (!ni)
			return -ENOMEM;
		*ids = ni;
		*cap = c;
	}
	(*ids)[(*n)++] = id;
	return 0;
}

/* Adds the project IDs still charged on @part: live volumes and directories in the trash. */
static int collect_used_ids(Manager *m, Partition *part, uint32_t **ret, size_t *ret_n)
{
	uint32_t *ids = NULL;
	size_t n = 0, cap = 0;
	DIR *d;
	struct dirent *de;

	pthread_rwlock_rdlock(&m->reg_lock);
	for (size_t i = 0; i < m->n_vols; i++)
		if (m->vols[i]->projid && m->vols[i]->part == part) {
			if (push_id(&ids, &n, &cap, m->vols[i]->projid) < 0) {
				pthread_rwlock_unlock(&m->reg_lock);
				free(ids);
				return -ENOMEM;
			}
		}
	pthread_rwlock_unlock(&m->reg_lock);

	d = opendir_fd(part->trash_fd);
	if (d) {
		while ((de = readdir(d))) {
			_cleanup_close_ int fd = -EBADF;
			uint32_t id = 0;

			if (de->d_name[0] == '.')
				continue;
			fd = openat(part->trash_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (fd >= 0 && quota_get_project(fd, &id, NULL) == 0 && id && push_id(&ids, &n, &cap, id) < 0) {
				closedir(d);
				free(ids);
				return -ENOMEM;
			}
		}
		closedir(d);
	}
	*ret = ids;
	*ret_n = n;
	return 0;
}

static int assign_limit(Manager *m, Volume *v, int dirfd, char **reterr_msg)
{
	int r;

	r = quota_set_project(dirfd, v->projid);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot set XFS project %u on volume %s: %s", v->projid, v->name,
			       strerror(-r));
	r = quota_set_limit(v->part->root_fd, v->projid, v->opts.size_bytes, v->opts.inodes);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot set the quota limit of volume %s: %s", v->name, strerror(-r));
	return 0;
}

int quota_apply_create(Manager *m, Volume *v, int dirfd, char **reterr_msg)
{
	_cleanup_free_ uint32_t *used = NULL;
	size_t n = 0;
	int r;

	if (!wants_quota(&v->opts))
		return 0;
	r = collect_used_ids(m, v->part, &used, &n);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "out of memory");
	v->projid = quota_next_free_id(used, n, QUOTA_PROJID_MIN);
	if (!v->projid)
		return errmsg_set(reterr_msg, -ENOSPC, "no free XFS project ID on partition %s", v->part->label);
	return assign_limit(m, v, dirfd, reterr_msg);
}

void quota_release_id(Manager *m, Partition *part, uint32_t projid)
{
	int r;

	if (!projid || !part->quota)
		return;
	r = quota_set_limit(part->root_fd, projid, 0, 0);
	if (r < 0)
		log_warning_errno(r, "partition %s: cannot clear the limit of project %u", part->label, projid);
}

void quota_release(Manager *m, Volume *v)
{
	if (v->part && v->projid)
		quota_release_id(m, v->part, v->projid);
	v->projid = 0;
}

json_t *quota_status(Manager *m, Volume *v)
{
	QuotaUsage u = { 0 };
	json_t *q;
	int r;

	if (!wants_quota(&v->opts) && !v->projid)
		return NULL;
	q = json_object();
	if (!q)
		return NULL;
	json_object_set_new(q, "project_id", json_integer(v->projid));
	json_object_set_new(q, "limit_bytes", json_integer((json_int_t)v->opts.size_bytes));
	json_object_set_new(q, "limit_inodes", json_integer((json_int_t)v->opts.inodes));
	if (!v->part || !v->part->present)
		return q;
	if (!v->part->quota) {
		json_object_set_new(q, "problem", json_string("partition mounted without project quota: limit not enforced"));
		return q;
	}
	r = quota_get(v->part->root_fd, v->projid, &u);
	if (r < 0) {
		json_object_set_new(q, "problem", json_string(strerror(-r)));
		return q;
	}
	/* From quota accounting, no directory walk. */
	json_object_set_new(q, "used_bytes", json_integer((json_int_t)u.used_bytes));
	json_object_set_new(q, "used_inodes", json_integer((json_int_t)u.used_inodes));
	json_object_set_new(q, "enforced_limit_bytes", json_integer((json_int_t)u.bytes_hard));
	json_object_set_new(q, "enforced_limit_inodes", json_integer((json_int_t)u.inodes_hard));
	return q;
}

int quota_repair(Manager *m, Volume *v)
{
	_cleanup_close_ int fd = -EBADF;
	_cleanup_free_ char *err = NULL;
	QuotaUsage u = { 0 };
	uint32_t id = 0;
	bool inherit = false, changed = false;
	int r;

	if (!wants_quota(&v->opts))
		return 0;
	if (!v->part->quota) {
		log_error("volume %s: size/inodes limit set but partition %s has no project quota now; NOT enforced",
			  v->name, v->part->label);
		return 0;
	}
	fd = openat(v->part->volumes_fd, v->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	if (!v->projid) {
		_cleanup_free_ uint32_t *used = NULL;
		size_t n = 0;
		r = collect_used_ids(m, v->part, &used, &n);
		if (r < 0)
			return r;
		v->projid = quota_next_free_id(used, n, QUOTA_PROJID_MIN);
		changed = true;
	}
	r = quota_get_project(fd, &id, &inherit);
	if (r < 0)
		return r;
	r = quota_get(v->part->root_fd, v->projid, &u);
	if (r < 0)
		return r;
	if (id != v->projid || !inherit || u.bytes_hard != v->opts.size_bytes || u.inodes_hard != v->opts.inodes) {
		log_warning("volume %s: project %u or its limit was missing (dir project %u); repairing", v->name,
			    v->projid, id);
		r = assign_limit(m, v, fd, &err);
		if (r < 0)
			return log_error_errno(r, "volume %s: quota repair failed: %s", v->name, err ? err : "");
	}
	if (changed)
		return save_record(m, v);
	return 0;
}
