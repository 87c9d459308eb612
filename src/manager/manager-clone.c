/* SPDX-License-Identifier: MIT */
/*
 * Create with from=SOURCE: the checks before anything is written (SOURCE,
 * its partition, reflink, whether the clone fits its limits), the clone into
 * the new directory between the directory and the record of Create's commit
 * order, and the clone's part of Status.
 *
 * SOURCE's op_lock is held for the whole clone (create_lock is already held,
 * as manager.h orders them): Mount, Unmount and Remove of SOURCE wait.
 *
 * Whether SOURCE is in use is never taken from the plugin's own mount count
 * alone: a container keeps its bind when the plugin loses the count (docker
 * plugin disable -f and enable, an upgrade under running tasks), and the
 * plugin cannot see the mount namespaces of other PID namespaces. So a
 * reflink clone is always taken under a freeze, and a copy is always verified
 * under one (clone.h); the count and the binds the plugin can see only decide
 * what Status says, and refuse a copy before it starts.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clone/clone.h"
#include "manager/manager-internal.h"
#include "pool/mount-users.h"
#include "pool/sizelimit.h"
#include "util/errmsg.h"
#include "util/log.h"
#include "util/macro.h"

void manager_clone_prep_done(ClonePrep *prep)
{
	prep->source = volume_unref(prep->source);
}

static bool partition_is(const PartitionInfo *info, const char *ref)
{
	return streq(info->uuid, ref) || streq(info->label, ref);
}

/* What a clone of @src will be charged: quota accounting if SOURCE has a project, else a walk. */
static int source_usage(PartitionFs *fs, Volume *src, uint32_t projid, uint64_t *ret_bytes, uint64_t *ret_inodes,
			char **reterr_msg)
{
	_cleanup_close_ int sfd = -EBADF;

	if (fs->quota && sizelimit_usage(fs, projid, ret_bytes, ret_inodes) == 0)
		return 0;
	sfd = openat(fs->volumes_fd, src->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot open volume %s: %s", src->name, errno_str(errno));
	return clone_measure(sfd, ret_bytes, ret_inodes, reterr_msg);
}

static int check_fits(Manager *m, ClonePrep *prep, uint32_t projid, const char *pname, char **reterr_msg)
{
	const VolumeOptions *o = &prep->opts;
	uint64_t bytes = 0, inodes = 0, free_b = 0, total_b = 0;
	PartitionFs *fs;
	int r;

	if (!sizelimit_wanted(o) && !prep->copy)
		return 0;
	fs = partition_fs_get(m->pool, prep->part);
	if (!fs)
		return errmsg_set(reterr_msg, -ENODEV, "the partition of volume %s went away", prep->source->name);
	r = source_usage(fs, prep->source, projid, &bytes, &inodes, reterr_msg);
	if (r == 0 && prep->copy && partition_fs_free_bytes(fs, &free_b, &total_b) == 0 && bytes > free_b)
		r = errmsg_set(reterr_msg, -ENOSPC,
			       "copying volume %s needs %llu bytes, partition %s has %llu free", prep->source->name,
			       (unsigned long long)bytes, pname, (unsigned long long)free_b);
	partition_fs_put(fs);
	if (r < 0)
		return r;
	/* XFS charges every file's blocks to the file's project, shared or not: a clone costs its full usage. */
	if (o->size_bytes && bytes > o->size_bytes)
		return errmsg_set(reterr_msg, -EDQUOT,
				  "volume %s uses %llu bytes, more than the new volume's size limit of %llu: a clone is "
				  "charged in full to its own limit (XFS counts shared blocks in each project). Give a "
				  "larger size, or none to inherit %s's",
				  prep->source->name, (unsigned long long)bytes, (unsigned long long)o->size_bytes,
				  prep->source->name);
	if (o->inodes && inodes > o->inodes)
		return errmsg_set(reterr_msg, -EDQUOT,
				  "volume %s has %llu files and directories, more than the new volume's inodes limit of "
				  "%llu. Give a larger inodes, or none to inherit %s's",
				  prep->source->name, (unsigned long long)inodes, (unsigned long long)o->inodes,
				  prep->source->name);
	return 0;
}

int manager_clone_prepare(Manager *m, const VolumeOptions *opts, const CloneRequest *req, ClonePrep *prep,
			 char **reterr_msg)
{
	char pname[PARTITION_NAME_MAX];
	PartitionDevice dev;
	PartitionInfo info;
	VolumeOptions src_opts;
	uint32_t projid;
	const char *problem = NULL;
	Volume *src;
	bool reflink;

	*prep = (ClonePrep){ .opts = *opts, .from_fd = -EBADF };
	src = registry_lookup(m->reg, req->from);
	if (!src)
		return errmsg_set(reterr_msg, -ENOENT, "cannot clone volume %s (from=%s): there is no such volume",
				  req->from, req->from);
	prep->source = src;
	registry_read_lock(m->reg);
	if (src->corrupt)
		problem = "its record is unreadable";
	else if (src->index_only)
		problem = "its partition is not available";
	else if (src->state != VOLUME_READY || src->removed)
		problem = "it is being removed";
	prep->part = src->part;
	src_opts = *src->opts;
	projid = src->projid;
	registry_unlock(m->reg);
	if (problem)
		return errmsg_set(reterr_msg, -EBUSY, "cannot clone volume %s: %s", src->name, problem);

	partition_snapshot(m->pool, prep->part, &info);
	partition_display_name(&info, pname, sizeof(pname));
	if (!info.present || !partition_verify_recent(m->pool, prep->part, 1000))
		return errmsg_set(reterr_msg, -ENODEV, "cannot clone volume %s: its partition %s is not available: %s",
				  src->name, pname, info.problem[0] ? info.problem : "not detected");
	/* Blocks are shared within one filesystem only. */
	if (opts->partition[0] && !partition_is(&info, opts->partition))
		return errmsg_set(reterr_msg, -EXDEV,
				  "volume %s is on partition %s (UUID %s), not on '%s': a clone shares its source's "
				  "blocks, so it is made on the source's partition. Leave out partition= or name that one",
				  src->name, pname, info.uuid, opts->partition);

	/* Limits are inherited unless given. */
	if (!prep->opts.size_bytes)
		prep->opts.size_bytes = src_opts.size_bytes;
	if (!prep->opts.inodes)
		prep->opts.inodes = src_opts.inodes;

	partition_device_snapshot(m->pool, prep->part, &dev);
	reflink = !dev.has_xfs || dev.xfs.reflink; /* unknown geometry: FICLONE itself will say */
	if (!reflink && !req->copy)
		return errmsg_set(reterr_msg, -EOPNOTSUPP,
				  "partition %s was made without reflink (xfs_info shows reflink=0), so a clone cannot "
				  "share blocks with volume %s and would copy every byte. Add -o clone_copy=true to copy "
				  "(only while %s is not in use), or use a partition made with mkfs.xfs -m reflink=1",
				  pname, src->name, src->name);
	prep->copy = !reflink;
	return check_fits(m, prep, projid, pname, reterr_msg);
}

bool manager_volume_known_in_use(Volume *src, PartitionFs *fs, bool mounted, char *why, size_t len)
{
	char root[VOLUME_NAME_MAX + 32];
	MountUser *u = NULL;
	size_t n = 0, scanned = 0;

	if (mounted) {
		snprintf(why, len, "it is mounted");
		return true;
	}
	bind_root(src->name, root, sizeof(root));
	/* An unreadable /proc shows nothing: the freeze or the verification still decides. */
	if (mount_users_find("/proc", fs->dev, root, 0, NULL, &u, &n, &scanned) < 0 || n == 0) {
		mount_users_free(u, n);
		return false;
	}
	snprintf(why, len, "process %d (%s) has it mounted at %s, in a mount namespace this plugin did not mount it in",
		 (int)u[0].pid, u[0].comm, u[0].target);
	mount_users_free(u, n);
	return true;
}

static int clone_error(Manager *m, ClonePrep *prep, Volume *v, int r, const char *why, char **reterr_msg)
{
	const char *src = prep->source->name;
	unsigned budget = (unsigned)m->cfg->clone_freeze_budget_ms;

	switch (r) {
	case -ETIME:
		return errmsg_set(reterr_msg, r,
				  "cannot clone volume %s into %s: %s. Writes on its partition were held that long. Raise "
				  "NVMEVOL_CLONE_FREEZE_BUDGET_MS (now %u ms): every clone is taken under a freeze, so "
				  "that it shows one instant",
				  src, v->name, why, budget);
	case -EAGAIN:
		return errmsg_set(reterr_msg, r,
				  "cannot clone volume %s into %s: %s. Try again later: when it is written less, or when "
				  "its leases are given up", src, v->name, why);
	case -EBUSY:
		if (!prep->copy)
			break; /* the filesystem was frozen by someone else */
		return errmsg_set(reterr_msg, r,
				  "cannot clone volume %s into %s: %s. Stop the containers that use it and create %s again",
				  src, v->name, why, v->name);
	case -ENOBUFS:
		return errmsg_set(reterr_msg, r,
				  "cannot clone volume %s into %s: %s. Raise NVMEVOL_CLONE_MEMORY_MB (now %llu), or clone "
				  "a smaller tree",
				  src, v->name, why, (unsigned long long)m->cfg->clone_memory_mb);
	case -EDQUOT:
		return errmsg_set(reterr_msg, r,
				  "cannot clone volume %s into %s: %s (the clone exceeds its size or inodes limit; give "
				  "larger ones)", src, v->name, why);
	default:
		break;
	}
	return errmsg_set(reterr_msg, r, "cannot clone volume %s into %s: %s", src, v->name, why);
}

/* The root's owner and mode given for the new volume win over those it was filled with. */
static int apply_root_options(Volume *v, int dfd, char **reterr_msg)
{
	if ((v->opts->has_uid || v->opts->has_gid) &&
	    fchown(dfd, v->opts->has_uid ? v->opts->uid : (uid_t)-1, v->opts->has_gid ? v->opts->gid : (gid_t)-1) < 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot set the owner of %s: %s", v->name, errno_str(errno));
	if (v->opts->has_mode && fchmod(dfd, v->opts->mode) < 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot set the mode of %s: %s", v->name, errno_str(errno));
	if ((v->opts->has_uid || v->opts->has_gid || v->opts->has_mode) && fsync(dfd) < 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot sync %s: %s", v->name, errno_str(errno));
	return 0;
}

/* An import: the volume's new directory gets the tree of @prep->from_fd (nothing writes to it: no freeze). */
static int fill_from_dir(Manager *m, ClonePrep *prep, Volume *v, PartitionFs *fs, char **reterr_msg)
{
	_cleanup_close_ int dfd = -EBADF;
	_cleanup_free_ char *why = NULL;
	CloneParams p = { .src_fd = prep->from_fd, .freeze_fd = -EBADF, .allow_copy = prep->copy,
			  .mem_max = m->cfg->clone_memory_mb << 20 };
	CloneStats st = { 0 };
	int r;

	dfd = openat(fs->volumes_fd, v->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot open the new volume %s: %s", v->name,
				  errno_str(errno));
	p.dst_fd = dfd;
	r = clone_tree(&p, &st, &why);
	if (r == -EDQUOT)
		return errmsg_set(reterr_msg, r, "the import does not fit volume %s's size or inodes limit: %s", v->name,
				  why ? why : errno_str(r));
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot fill volume %s from the import: %s", v->name, why ? why : errno_str(r));
	return apply_root_options(v, dfd, reterr_msg);
}

int manager_clone_run(Manager *m, ClonePrep *prep, Volume *v, PartitionFs *fs, char **reterr_msg)
{
	_cleanup_close_ int sfd = -EBADF, dfd = -EBADF;
	_cleanup_free_ char *why = NULL;
	Volume *src = prep->source;
	/* The wait for XFS's writeback within Docker's patience (clone.h). */
	CloneParams p = { .freeze_budget_ms = (unsigned)m->cfg->clone_freeze_budget_ms, .allow_copy = prep->copy,
			  .mem_max = m->cfg->clone_memory_mb << 20, .writeback_wait_ms = CLONE_WRITEBACK_WAIT_CREATE_MS };
	CloneStats st = { 0 };
	const FreezeMarker marker = { .dir_fd = store_freeze_dir(m->store), .name = prep->part->uuid };
	char use[PATH_MAX + 128] = "";
	struct stat a, b;
	bool mounted, in_use;
	int r;

	if (prep->from_fd >= 0)
		return fill_from_dir(m, prep, v, fs, reterr_msg);
	v->clone = calloc(1, sizeof(*v->clone));
	if (!v->clone)
		return errmsg_set(reterr_msg, -ENOMEM, "out of memory");
	sfd = openat(fs->volumes_fd, src->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	dfd = openat(fs->volumes_fd, v->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0 || dfd < 0 || fstat(sfd, &a) < 0 || fstat(dfd, &b) < 0 || a.st_dev != fs->dev || b.st_dev != fs->dev)
		return errmsg_set(reterr_msg, -EXDEV, "cannot open volume %s or %s on their partition", src->name,
				  v->name);
	p.src_fd = sfd;
	p.dst_fd = dfd;

	pthread_mutex_lock(&src->op_lock);
	registry_read_lock(m->reg);
	mounted = src->mounted;
	registry_unlock(m->reg);
	in_use = manager_volume_known_in_use(src, fs, mounted, use, sizeof(use));
	if (in_use && prep->copy)
		r = errmsg_set(reterr_msg, -EBUSY,
			       "cannot copy volume %s while it is in use: %s. A copy (clone_copy=true: no shared blocks) "
			       "is only consistent while nothing writes to it. Stop the containers that use it and create "
			       "%s again",
			       src->name, use, v->name);
	else {
		/* Always: writes that race with the clone are carried over, or fail a copy (clone.h). */
		p.freeze_fd = fs->root_fd;
		p.freeze_marker = &marker;
		r = clone_tree(&p, &st, &why);
	}
	pthread_mutex_unlock(&src->op_lock);
	if (r < 0) {
		if (why)
			r = clone_error(m, prep, v, r, why, reterr_msg);
		return r;
	}

	/* uid=, gid= and mode= given for the clone win over the copied ones of SOURCE's directory. */
	r = apply_root_options(v, dfd, reterr_msg);
	if (r < 0)
		return r;

	snprintf(v->clone->from, sizeof(v->clone->from), "%s", src->name);
	v->clone->at = st.at;
	v->clone->source_in_use = in_use;
	v->clone->copied = st.copied > 0;
	v->clone->frozen_ms = (uint32_t)((st.frozen_us + 999) / 1000);
	v->clone->writeback_wait_ms = (uint32_t)(st.writeback_wait_us / 1000);
	v->clone->entries = st.files + st.dirs + st.symlinks + st.specials + st.hardlinks;
	v->clone->bytes = st.bytes;
	log_info("volume %s: cloned from %s: %llu entries, %llu bytes %s in %.1f ms%s%.1f ms frozen (%.1f ms of it "
		 "to flush and freeze), %u freeze(s), %llu bytes carried over, %.1f s waited for XFS's writeback)",
		 v->name, src->name, (unsigned long long)v->clone->entries, (unsigned long long)st.bytes,
		 st.copied ? "copied" : "shared", st.elapsed_us / 1000.0, in_use ? " (in use: " : " (not known in use: ",
		 st.frozen_us / 1000.0, st.freeze_call_us / 1000.0, st.freezes, (unsigned long long)st.delta_bytes,
		 st.writeback_wait_us / 1e6);
	return 0;
}

int manager_clone_check_existing(Volume *existing, const CloneRequest *req, VolumeOptions *opts, char **reterr_msg)
{
	if (!existing->clone || !streq(existing->clone->from, req->from))
		return errmsg_set(reterr_msg, -EEXIST, "volume %s already exists and is not a clone of %s", existing->name,
				  req->from);
	/* Compared as they were resolved at creation: limits not given were inherited. */
	if (!opts->size_bytes)
		opts->size_bytes = existing->opts->size_bytes;
	if (!opts->inodes)
		opts->inodes = existing->opts->inodes;
	return 0;
}

void manager_clone_add_status(Volume *v, json_t *status)
{
	const VolumeClone *c = v->clone;
	char stamp[40];

	if (!c)
		return;
	format_rfc3339(c->at, stamp, sizeof(stamp));
	json_object_set_new(status, "cloned_from", json_string(c->from));
	json_object_set_new(status, "cloned_at", json_string(stamp));
	json_object_set_new(status, "clone",
			    json_pack("{s:s, s:b, s:I, s:I, s:I, s:I}", "method", c->copied ? "copy" : "reflink",
				      "source_in_use", c->source_in_use, "frozen_ms", (json_int_t)c->frozen_ms,
				      "writeback_wait_ms", (json_int_t)c->writeback_wait_ms, "entries",
				      (json_int_t)c->entries, "bytes", (json_int_t)c->bytes));
}
