/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "pool/sizelimit.h"
#include "pool/quota.h"
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

typedef struct Scan {
	Registry *reg;
	Partition *part;
	PartitionFs *fs;
	ProjidSet *used;
	int dirfd; /* the directory being listed */
} Scan;

static void add_shadow(Volume *shadow, void *userdata)
{
	Scan *sc = userdata;

	if (shadow->part == sc->part)
		projid_set_add(sc->used, shadow->projid);
}

static int add_dir_projid(const char *name, void *userdata)
{
	Scan *sc = userdata;
	_cleanup_close_ int fd = -EBADF;
	uint32_t id = 0;
	int r;

	/* O_DIRECTORY before the open: never a device's or a FIFO's open(). A file there carries no ID we hand out. */
	fd = openat(sc->dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR || errno == ELOOP ? 0 : negative_errno();
	r = quota_get_project(fd, &id, NULL);
	if (r == -ENOTTY || r == -EOPNOTSUPP)
		return 0; /* no project IDs on this filesystem: nothing carries one */
	if (r < 0)
		return r;
	projid_set_add(sc->used, id);
	return 0;
}

/*
 * The project IDs in use on @part: live volumes and shadowed records, then
 * what the top directories of volumes/, trash/ and quarantine/ really carry
 * (a volume whose record is unreadable, a directory in the trash or moved to
 * the quarantine). The registry is read first: a volume removed meanwhile has
 * its directory in the trash before it leaves the registry.
 */
static void collect_used_ids(ProjidSet *used, void *userdata)
{
	Scan *sc = userdata;
	int dirs[] = { sc->fs->volumes_fd, sc->fs->trash_fd, sc->fs->quarantine_fd };

	sc->used = used;
	registry_read_lock(sc->reg);
	for (size_t i = 0; i < registry_size_locked(sc->reg); i++) {
		Volume *v = registry_at_locked(sc->reg, i);
		if (v->part == sc->part)
			projid_set_add(used, v->projid);
	}
	registry_foreach_shadow_locked(sc->reg, NULL, add_shadow, sc);
	registry_unlock(sc->reg);

	for (size_t i = 0; i < ELEMENTSOF(dirs) && !used->err; i++) {
		int r;

		if (dirs[i] < 0)
			continue;
		sc->dirfd = dirs[i];
		r = dir_foreach_name(dirs[i], add_dir_projid, sc);
		if (r < 0 && !used->err)
			used->err = r; /* an incomplete scan could hand out an ID in use */
	}
}

int sizelimit_reserve_id(ProjidAlloc *ids, Registry *reg, Partition *part, PartitionFs *fs, uint32_t *ret_id)
{
	Scan sc = { .reg = reg, .part = part, .fs = fs };
	uint32_t id;
	int r;

	*ret_id = 0;
	r = projid_reserve(ids, part, QUOTA_PROJID_MIN, collect_used_ids, &sc, &id);
	if (r < 0)
		return r;
	/*
	 * A removed volume's limit stays on its free ID (clearing it after the
	 * delete would race with the next user), and so does a crashed create's:
	 * clear it while the ID is ours alone, so that a holder that sets no
	 * limit (a first resize that is then refused) is not bound by it.
	 */
	if (fs->quota) {
		r = quota_set_limit(fs->root_fd, id, 0, 0);
		if (r < 0) {
			projid_release(ids, part, id);
			return r;
		}
	}
	*ret_id = id;
	return 0;
}

void sizelimit_commit_id(ProjidAlloc *ids, Partition *part, uint32_t projid)
{
	projid_commit(ids, part, projid);
}

static int assign(PartitionFs *fs, const Volume *v, int dirfd, char **reterr_msg)
{
	int r;

	r = quota_set_project(dirfd, v->projid);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot set XFS project %u on volume %s: %s", v->projid, v->name,
				  errno_str(r));
	r = quota_set_limit(fs->root_fd, v->projid, v->opts->size_bytes, v->opts->inodes);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot set the quota limit of volume %s: %s", v->name, errno_str(r));
	return 0;
}

static int reserve_error(int r, char **reterr_msg)
{
	if (r == -ENOSPC)
		return errmsg_set(reterr_msg, r, "no free XFS project ID is left on the partition");
	return errmsg_set(reterr_msg, r, "cannot reserve an XFS project ID on the partition (reading the IDs in use, "
			  "or clearing the free ID's old limit): %s", errno_str(r));
}

int sizelimit_apply_new(ProjidAlloc *ids, Registry *reg, PartitionFs *fs, Volume *v, int dirfd, char **reterr_msg)
{
	int r;

	if (!sizelimit_wanted(v->opts))
		return 0;
	r = sizelimit_reserve_id(ids, reg, v->part, fs, &v->projid);
	if (r < 0)
		return reserve_error(r, reterr_msg);
	return assign(fs, v, dirfd, reterr_msg);
}

void sizelimit_release(ProjidAlloc *ids, Partition *part, PartitionFs *fs, uint32_t projid)
{
	int r;

	if (!projid)
		return;
	/* Still reserved while its limits go: nobody else can have set limits on it yet. */
	if (fs->quota) {
		r = quota_set_limit(fs->root_fd, projid, 0, 0);
		if (r < 0)
			log_warning_errno(r, "cannot clear the limit of project %u", projid);
	}
	projid_release(ids, part, projid);
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

int sizelimit_repair(ProjidAlloc *ids, Registry *reg, PartitionFs *fs, Volume *v, bool *ret_changed)
{
	_cleanup_close_ int fd = -EBADF;
	_cleanup_free_ char *err = NULL;
	QuotaUsage u = { 0 };
	uint32_t id = 0;
	bool inherit = false;
	int r;

	*ret_changed = false;
	if (fs->read_only)
		return 0;
	if (!sizelimit_wanted(v->opts)) {
		/* An ID kept after its limits were removed (volume resize ... none): no stale limit may stay on it. */
		if (v->projid && fs->quota && quota_get(fs->root_fd, v->projid, &u) == 0 &&
		    (u.bytes_hard || u.inodes_hard)) {
			log_warning("volume %s: project %u has limits its record does not have; clearing them", v->name,
				    v->projid);
			return quota_set_limit(fs->root_fd, v->projid, 0, 0);
		}
		return 0;
	}
	if (!fs->quota) {
		log_error("volume %s: size/inodes limit set but its partition has no project quota now; NOT enforced",
			  v->name);
		return 0;
	}
	fd = openat(fs->volumes_fd, v->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	if (!v->projid) {
		uint32_t nid;

		r = sizelimit_reserve_id(ids, reg, v->part, fs, &nid);
		if (r < 0)
			return r;
		registry_write_lock(reg);
		v->projid = nid;
		registry_unlock(reg);
		sizelimit_commit_id(ids, v->part, nid); /* the registry carries it */
		*ret_changed = true;
	}
	r = quota_get_project(fd, &id, &inherit);
	if (r < 0)
		return r;
	r = quota_get(fs->root_fd, v->projid, &u);
	if (r < 0)
		return r;
	if (id != v->projid || !inherit || !byte_limit_matches(fs->root_fd, u.bytes_hard, v->opts->size_bytes) ||
	    u.inodes_hard != v->opts->inodes) {
		log_warning("volume %s: project %u or its limit was missing (directory project %u, limit %llu bytes "
			    "%llu inodes); repairing",
			    v->name, v->projid, id, (unsigned long long)u.bytes_hard, (unsigned long long)u.inodes_hard);
		r = assign(fs, v, fd, &err);
		if (r < 0)
			return log_error_errno(r, "volume %s: quota repair failed: %s", v->name, err ? err : "");
	}
	return 0;
}

/* One directory being walked: a stream over its own fd. */
typedef struct WalkLevel {
	DIR *d;
} WalkLevel;

#define TAG_DEPTH_MAX 4096

/* Tags one entry of @parent_fd; a directory is returned open in *ret_dirfd to be walked. */
static int tag_entry(PartitionFs *fs, int parent_fd, const char *name, uint32_t projid, int *ret_dirfd, bool *ret_tagged)
{
	_cleanup_close_ int fd = -EBADF;
	struct stat st;
	int r;

	*ret_dirfd = -EBADF;
	*ret_tagged = false;
	/* O_NOFOLLOW: a symlink is not followed (its few bytes stay uncharged); O_NONBLOCK: a FIFO never blocks. */
	fd = openat(parent_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		/* Gone meanwhile, a symlink, a socket, a device node on a nodev mount: nothing to charge. */
		return errno == ENOENT || errno == ELOOP || errno == ENXIO || errno == EACCES || errno == EPERM ||
		       errno == ENODEV ? 0 : negative_errno();
	if (fstat(fd, &st) < 0)
		return negative_errno();
	if (st.st_dev != fs->dev)
		return 0; /* a mount point inside the volume: not ours to cross */
	if (S_ISDIR(st.st_mode))
		r = quota_set_project(fd, projid);
	else if (S_ISREG(st.st_mode))
		r = quota_set_file_project(fd, projid);
	else
		return 0;
	if (r < 0)
		return r;
	*ret_tagged = true;
	if (S_ISDIR(st.st_mode))
		*ret_dirfd = TAKE_FD(fd);
	return 0;
}

int sizelimit_tag_tree(PartitionFs *fs, int top_fd, uint32_t projid, uint64_t *ret_tagged, char **reterr_msg)
{
	WalkLevel *stack = NULL;
	size_t depth = 0;
	uint64_t tagged = 0;
	int r;

	/*
	 * Pre-order: a directory gets the ID (and PROJINHERIT) before it is read,
	 * so whatever is created in it from then on inherits the ID, and whatever
	 * was there before shows up in the read. Iterative: the admin thread's
	 * stack is small and trees can be deep.
	 */
	r = quota_set_project(top_fd, projid);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot set XFS project %u on the volume directory: %s", projid, errno_str(r));
	tagged++;
	stack = calloc(TAG_DEPTH_MAX, sizeof(*stack));
	if (!stack)
		return -ENOMEM;
	stack[0].d = opendir_fd(top_fd);
	if (!stack[0].d) {
		r = negative_errno();
		goto out;
	}
	depth = 1;
	while (depth > 0) {
		WalkLevel *top = &stack[depth - 1];
		struct dirent *de;
		bool t;
		int sub;

		errno = 0;
		de = readdir(top->d);
		if (!de) {
			if (errno != 0) {
				r = negative_errno();
				goto out;
			}
			closedir(top->d);
			top->d = NULL;
			depth--;
			continue;
		}
		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		if (de->d_type != DT_DIR && de->d_type != DT_REG && de->d_type != DT_UNKNOWN)
			continue;
		r = tag_entry(fs, dirfd(top->d), de->d_name, projid, &sub, &t);
		if (r < 0) {
			errmsg_set(reterr_msg, r, "cannot set XFS project %u on '%.200s' in the volume: %s", projid, de->d_name,
				   errno_str(r));
			goto out;
		}
		if (t)
			tagged++;
		if (sub < 0)
			continue;
		if (depth == TAG_DEPTH_MAX) {
			(void)close(sub);
			r = errmsg_set(reterr_msg, -ELOOP, "the volume's directory tree is deeper than %d levels", TAG_DEPTH_MAX);
			goto out;
		}
		stack[depth].d = fdopendir(sub);
		if (!stack[depth].d) {
			r = negative_errno();
			(void)close(sub);
			goto out;
		}
		depth++;
	}
	r = 0;
out:
	for (size_t i = 0; i < depth; i++)
		if (stack[i].d)
			closedir(stack[i].d);
	free(stack);
	if (r < 0 && reterr_msg && !*reterr_msg)
		errmsg_set(reterr_msg, r, "cannot walk the volume directory: %s", errno_str(r));
	*ret_tagged = tagged;
	return r;
}

int sizelimit_usage(PartitionFs *fs, uint32_t projid, uint64_t *ret_bytes, uint64_t *ret_inodes)
{
	QuotaUsage u = { 0 };
	int r;

	if (!projid)
		return -ENOENT;
	r = quota_get(fs->root_fd, projid, &u);
	if (r < 0)
		return r;
	*ret_bytes = u.used_bytes;
	*ret_inodes = u.used_inodes;
	return 0;
}

int sizelimit_set(PartitionFs *fs, uint32_t projid, uint64_t bytes, uint64_t inodes, char **reterr_msg)
{
	int r = quota_set_limit(fs->root_fd, projid, bytes, inodes);

	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot set the limits of XFS project %u: %s", projid, errno_str(r));
	return 0;
}
