/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "sizelimit.h"
#include "quota.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/log.h"
#include "util/macro.h"

bool sizelimit_wanted(const VolumeOptions *o)
{
	return o->size_bytes > 0 || o->inodes > 0;
}

int sizelimit_check_create(PartitionFs *fs, const char *partition_name, const VolumeOptions *o, char **reterr_msg)
{
	if (!sizelimit_wanted(o) || fs->quota)
		return 0;
	return errmsg_set(reterr_msg, -EOPNOTSUPP,
			  "size and inodes need XFS project quota, but partition %s is mounted without it: "
			  "the kernel refused the prjquota mount option (a kernel without CONFIG_XFS_QUOTA?). "
			  "Create the volume without size/inodes, or run on a kernel with XFS quota support",
			  partition_name);
}

typedef struct IdList {
	uint32_t *ids;
	size_t n, cap;
	PartitionFs *fs;
	Partition *part;
	int err;
} IdList;

static void push_id(IdList *l, uint32_t id)
{
	if (l->err || !id)
		return;
	if (l->n == l->cap) {
		size_t c = l->cap ? l->cap * 2 : 64;
		uint32_t *ni = realloc(l->ids, c * sizeof(*ni));
		if (!ni) {
			l->err = -ENOMEM;
			return;
		}
		l->ids = ni;
		l->cap = c;
	}
	l->ids[l->n++] = id;
}

static void push_shadow(Volume *shadow, void *userdata)
{
	IdList *l = userdata;

	if (shadow->part == l->part)
		push_id(l, shadow->projid);
}

/* The project IDs still charged on @part: live volumes, shadowed records, directories in the trash. */
static int collect_used_ids(Registry *reg, Partition *part, PartitionFs *fs, IdList *l)
{
	struct dirent *de;
	DIR *d;

	*l = (IdList){ .fs = fs, .part = part };
	registry_read_lock(reg);
	for (size_t i = 0; i < registry_size_locked(reg); i++) {
		Volume *v = registry_at_locked(reg, i);
		if (v->part == part)
			push_id(l, v->projid);
	}
	registry_foreach_shadow_locked(reg, NULL, push_shadow, l);
	registry_unlock(reg);

	d = fs->trash_fd >= 0 ? opendir_fd(fs->trash_fd) : NULL;
	while (d && (de = readdir(d))) {
		_cleanup_close_ int fd = -EBADF;
		uint32_t id = 0;

		if (de->d_name[0] == '.')
			continue;
		fd = openat(fs->trash_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0 && quota_get_project(fd, &id, NULL) == 0)
			push_id(l, id);
	}
	if (d)
		closedir(d);
	if (l->err)
		free(l->ids);
	return l->err;
}

static uint32_t allocate_id(Registry *reg, Partition *part, PartitionFs *fs)
{
	IdList l;
	uint32_t id;

	if (collect_used_ids(reg, part, fs, &l) < 0)
		return 0;
	id = quota_next_free_id(l.ids, l.n, QUOTA_PROJID_MIN);
	free(l.ids);
	return id;
}

static int assign(PartitionFs *fs, const Volume *v, int dirfd, char **reterr_msg)
{
	int r;

	r = quota_set_project(dirfd, v->projid);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot set XFS project %u on volume %s: %s", v->projid, v->name,
				  errno_str(r));
	r = quota_set_limit(fs->root_fd, v->projid, v->opts.size_bytes, v->opts.inodes);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot set the quota limit of volume %s: %s", v->name, errno_str(r));
	return 0;
}

int sizelimit_apply_new(Registry *reg, PartitionFs *fs, Volume *v, int dirfd, char **reterr_msg)
{
	if (!sizelimit_wanted(&v->opts))
		return 0;
	v->projid = allocate_id(reg, v->part, fs);
	if (!v->projid)
		return errmsg_set(reterr_msg, -ENOSPC, "no free XFS project ID on the partition (or out of memory)");
	return assign(fs, v, dirfd, reterr_msg);
}

void sizelimit_release(PartitionFs *fs, uint32_t projid)
{
	int r;

	if (!projid || !fs->quota)
		return;
	r = quota_set_limit(fs->root_fd, projid, 0, 0);
	if (r < 0)
		log_warning_errno(r, "cannot clear the limit of project %u", projid);
}

json_t *sizelimit_status(PartitionFs *fs, const VolumeOptions *o, uint32_t projid)
{
	QuotaUsage u = { 0 };
	json_t *q;
	int r;

	if (!sizelimit_wanted(o) && !projid)
		return NULL;
	q = json_object();
	if (!q)
		return NULL;
	json_object_set_new(q, "project_id", json_integer(projid));
	json_object_set_new(q, "limit_bytes", json_integer((json_int_t)o->size_bytes));
	json_object_set_new(q, "limit_inodes", json_integer((json_int_t)o->inodes));
	if (!fs)
		return q;
	if (!fs->quota) {
		json_object_set_new(q, "problem", json_string("partition mounted without project quota: limit not enforced"));
		return q;
	}
	r = quota_get(fs->root_fd, projid, &u);
	if (r < 0) {
		json_object_set_new(q, "problem", json_string(errno_str(r)));
		return q;
	}
	/* From quota accounting, no directory walk. */
	json_object_set_new(q, "used_bytes", json_integer((json_int_t)u.used_bytes));
	json_object_set_new(q, "used_inodes", json_integer((json_int_t)u.used_inodes));
	json_object_set_new(q, "enforced_limit_bytes", json_integer((json_int_t)u.bytes_hard));
	json_object_set_new(q, "enforced_limit_inodes", json_integer((json_int_t)u.inodes_hard));
	return q;
}

/* The kernel keeps byte limits in whole filesystem blocks: a limit is right if it is @want rounded up. */
static bool byte_limit_matches(int root_fd, uint64_t have, uint64_t want)
{
	struct statvfs sv;
	uint64_t block = 4096;

	if (fstatvfs(root_fd, &sv) == 0 && sv.f_bsize > 0)
		block = sv.f_bsize;
	if (want == 0)
		return have == 0;
	return have >= want && have - want < block;
}

int sizelimit_repair(Registry *reg, PartitionFs *fs, Volume *v, bool *ret_changed)
{
	_cleanup_close_ int fd = -EBADF;
	_cleanup_free_ char *err = NULL;
	QuotaUsage u = { 0 };
	uint32_t id = 0;
	bool inherit = false;
	int r;

	*ret_changed = false;
	if (!sizelimit_wanted(&v->opts) || fs->read_only)
		return 0;
	if (!fs->quota) {
		log_error("volume %s: size/inodes limit set but its partition has no project quota now; NOT enforced",
			  v->name);
		return 0;
	}
	fd = openat(fs->volumes_fd, v->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	if (!v->projid) {
		v->projid = allocate_id(reg, v->part, fs);
		if (!v->projid)
			return -ENOSPC;
		*ret_changed = true;
	}
	r = quota_get_project(fd, &id, &inherit);
	if (r < 0)
		return r;
	r = quota_get(fs->root_fd, v->projid, &u);
	if (r < 0)
		return r;
	if (id != v->projid || !inherit || !byte_limit_matches(fs->root_fd, u.bytes_hard, v->opts.size_bytes) ||
	    u.inodes_hard != v->opts.inodes) {
		log_warning("volume %s: project %u or its limit was missing (directory project %u, limit %llu bytes "
			    "%llu inodes); repairing",
			    v->name, v->projid, id, (unsigned long long)u.bytes_hard, (unsigned long long)u.inodes_hard);
		r = assign(fs, v, fd, &err);
		if (r < 0)
			return log_error_errno(r, "volume %s: quota repair failed: %s", v->name, err ? err : "");
	}
	return 0;
}
