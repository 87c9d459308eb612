/* SPDX-License-Identifier: MIT */
/*
 * Snapshots of a volume: take (through the clone's frozen path, so one
 * instant across all files even while containers write), list with what
 * each costs, remove, roll back; their loading and crash recovery at start.
 *
 * Commit order (snapshot.h, snapstore.h):
 *  - take: record "pending", data directory, the frozen clone into it,
 *    record "committed" (the commit point);
 *  - remove: record "removing" (the commit point), data to the trash, record
 *    deleted;
 *  - rollback: a block-sharing copy of the snapshot built in
 *    snapshots/<volume>/rollback (and given the volume's project ID), then
 *    RENAME_EXCHANGE with volumes/<volume> (the commit point: before it the
 *    volume is untouched, after it the previous state is in rollback/), then
 *    the previous state is deleted. Whatever is in rollback/ is never the
 *    live volume, so start-up deletes it whenever it finds one.
 *  - take for a receive: as take, of the received tree, the record committed
 *    with a mark (receive_root) that the receive's commit settles
 *    (manager-receive.c); start-up keeps it if volumes/<volume> is that tree,
 *    else deletes it. Never listed while marked.
 * Start-up deletes only what a record proves uncommitted (pending) or
 * committed for removal (removing); a data directory without a record is
 * left where it is and logged.
 *
 * Quota: the snapshot's files are in XFS's default project 0 (the data
 * directory is made without the volume's ID, and the clone copies no inode
 * flags), which XFS never enforces and nvmevol never limits: a snapshot is
 * never charged to the volume's size= or inodes=, so it can never make the
 * volume's own writes fail. Its cost is the partition's free space.
 *
 * Every operation holds the volume's op_lock (Mount, Unmount and Remove of
 * the volume wait); the cost of `volume snapshots` is measured without it.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "clone/clone-cost.h"
#include "clone/clone.h"
#include "manager/manager-internal.h"
#include "pool/sizelimit.h"
#include "pool/snapstore.h"
#include "util/alloc-util.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/log.h"
#include "util/macro.h"

/* What `volume snapshots` spends measuring costs, all snapshots together. */
#define SNAPSHOT_COST_BUDGET_MS 2000

typedef struct SnapArgs {
	const char *snap;
	const char *token; /* export close */
	bool temporary;    /* take: for an export */
	bool evacuation;   /* take: for an evacuation's pass */
	const char *id;    /* take: the sender's ID (receive); NULL: a new random one */
	bool by_move;      /* take: for a move (snapshot.h) */
	int tree_dirfd;    /* take of a receive's tree: @tree in it, instead of volumes/<volume> */
	const char *tree;
	uint64_t receive_root; /* take of a receive's tree: its root's inode, the record's mark (snapshot.h) */
	VolumeSnapshot *ret; /* take of a receive's tree: the record, unlisted */
	json_t *result;
} SnapArgs;

static VolumeSnapshot *find_snap(Volume *v, const char *snap)
{
	for (size_t i = 0; i < v->n_snaps; i++)
		if (streq(v->snaps[i].name, snap))
			return &v->snaps[i];
	return NULL;
}

static json_t *snap_json(const VolumeSnapshot *s)
{
	char stamp[40];
	json_t *j;

	format_rfc3339(s->at, stamp, sizeof(stamp));
	j = json_pack("{s:s,s:s,s:b,s:I,s:I,s:I}", "name", s->name, "created_at", stamp, "volume_in_use",
		      s->volume_in_use, "frozen_ms", (json_int_t)s->frozen_ms, "entries", (json_int_t)s->entries,
		      "bytes", (json_int_t)s->bytes);
	if (!j)
		return NULL;
	if (s->cost_known) {
		format_rfc3339(s->cost_at, stamp, sizeof(stamp));
		json_object_set_new(j, "cost_bytes", json_integer((json_int_t)s->cost_bytes));
		json_object_set_new(j, "cost_complete", json_boolean(s->cost_complete));
		json_object_set_new(j, "cost_measured_at", json_string(stamp));
	}
	if (s->temporary)
		json_object_set_new(j, "temporary", json_true());
	if (s->by_move)
		json_object_set_new(j, "by_move", json_true());
	if (s->evacuation)
		json_object_set_new(j, "evacuation", json_true());
	if (s->id[0])
		json_object_set_new(j, "id", json_string(s->id));
	if (s->data_missing)
		json_object_set_new(j, "problem",
				    json_string("its data directory is missing on the partition; remove the snapshot"));
	return j;
}

void manager_snapshot_add_status(Volume *v, json_t *status)
{
	json_t *arr;

	if (v->n_snaps == 0)
		return;
	arr = json_array();
	for (size_t i = 0; arr && i < v->n_snaps; i++)
		json_array_append_new(arr, snap_json(&v->snaps[i]));
	json_object_set_new(status, "snapshots", arr);
}

int manager_snapshot_check_remove(Volume *v, char **reterr_msg)
{
	char names[512] = "";
	size_t len = 0;
	unsigned kept = 0;

	/* A move's snapshots go with the volume (manager_snapshot_remove_by_move); a user's are refused. */
	for (size_t i = 0; i < v->n_snaps; i++) {
		if (v->snaps[i].by_move)
			continue;
		if (len + 4 < sizeof(names))
			len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s", kept ? ", " : "",
						v->snaps[i].name);
		kept++;
	}
	if (kept == 0)
		return 0;
	if (len >= sizeof(names))
		strcpy(names + sizeof(names) - 4, "...");
	return errmsg_set(reterr_msg, -EBUSY,
			  "volume %s has %u snapshot(s): %s. A remove never deletes the snapshots you took (they may "
			  "be the only copy of what is being removed): remove each with 'nvmevol volume snapshot-rm %s "
			  "SNAPSHOT' first, or export it first",
			  v->name, kept, names, v->name);
}

/* The partition of @v, present, verified and writable; an Err if not. */
PartitionFs *manager_snapshot_writable_fs(Manager *m, Volume *v, const char *what, char **reterr_msg)
{
	char pname[PARTITION_NAME_MAX];
	PartitionInfo info;
	PartitionFs *fs;

	if (v->corrupt) {
		errmsg_set(reterr_msg, -EUCLEAN, "cannot %s volume %s: its record is unreadable (%s)", what, v->name,
			   v->corrupt);
		return NULL;
	}
	partition_snapshot(m->pool, v->part, &info);
	partition_display_name(&info, pname, sizeof(pname));
	fs = v->index_only ? NULL : partition_fs_get(m->pool, v->part);
	if (fs && !partition_verify_recent(m->pool, v->part, 1000)) {
		partition_fs_put(fs);
		fs = NULL;
	}
	if (!fs) {
		errmsg_set(reterr_msg, -ENODEV, "cannot %s volume %s: its partition %s (UUID %s) is not available: %s",
			   what, v->name, pname, info.uuid, info.problem[0] ? info.problem : "not detected");
		return NULL;
	}
	if (fs->read_only || fs->snapshots_fd < 0) {
		errmsg_set(reterr_msg, -EROFS,
			   "cannot %s volume %s: its partition %s is read-only until adopted ('nvmevol partition adopt %s')",
			   what, v->name, pname, info.uuid);
		partition_fs_put(fs);
		return NULL;
	}
	return fs;
}

static void set_snaps(Manager *m, Volume *v, VolumeSnapshot *snaps, size_t n)
{
	VolumeSnapshot *old;

	registry_write_lock(m->reg);
	old = v->snaps;
	v->snaps = snaps;
	v->n_snaps = n;
	registry_unlock(m->reg);
	free(old);
}

/*
 * @v's list with @s added (sorted) or, @s NULL, without @drop. Built under the
 * registry's write lock: `volume snapshots` writes the cost fields under it alone.
 */
static int change_snaps(Manager *m, Volume *v, const VolumeSnapshot *s, const char *drop)
{
	VolumeSnapshot *n, *old;
	bool placed = !s;
	size_t k = 0;

	registry_write_lock(m->reg);
	n = calloc(v->n_snaps + 1, sizeof(*n));
	if (!n) {
		registry_unlock(m->reg);
		return -ENOMEM;
	}
	for (size_t i = 0; i < v->n_snaps; i++) {
		if (!placed && strcmp(s->name, v->snaps[i].name) < 0) {
			n[k++] = *s;
			placed = true;
		}
		if (!drop || !streq(v->snaps[i].name, drop))
			n[k++] = v->snaps[i];
	}
	if (!placed)
		n[k++] = *s;
	old = v->snaps;
	v->snaps = n;
	v->n_snaps = k;
	registry_unlock(m->reg);
	free(old);
	return 0;
}

/* Moves @name of @dirfd to @part's trash and queues it; a failure leaves it for the next start. */
static int discard_dir_of(Manager *m, Partition *part, PartitionFs *fs, int dirfd, const char *name)
{
	char entry[TRASH_ENTRY_MAX];
	PartitionInfo info;
	int r;

	r = trash_move_in(fs, dirfd, name, entry);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	(void)fsync(fs->trash_fd);
	(void)fsync(dirfd);
	partition_snapshot(m->pool, part, &info);
	(void)trash_enqueue(m->trash, fs, info.uuid, entry);
	return 0;
}

int manager_snapshot_discard_dir(Manager *m, Volume *v, PartitionFs *fs, int dirfd, const char *name)
{
	return discard_dir_of(m, v->part, fs, dirfd, name);
}

/* Deletes snapshot @name of @d: its data to the trash, then its record (a crash between: its record still says so). */
static int drop_snapshot(Manager *m, Partition *part, PartitionFs *fs, SnapDir *d, const char *name)
{
	int r = discard_dir_of(m, part, fs, d->data_fd, name);

	return r < 0 ? r : snapstore_delete(d, name);
}

/* ---- take ---- */

static int snap_error(Manager *m, Volume *v, const char *snap, int r, const char *why, char **reterr_msg)
{
	switch (r) {
	case -ETIME:
		return errmsg_set(reterr_msg, r,
				  "cannot snapshot volume %s as %s: %s. Writes on its partition were held that long. Raise "
				  "NVMEVOL_CLONE_FREEZE_BUDGET_MS (now %u ms): a snapshot is taken under a freeze, so that "
				  "it shows one instant",
				  v->name, snap, why, (unsigned)m->cfg->clone_freeze_budget_ms);
	case -EAGAIN:
		return errmsg_set(reterr_msg, r, "cannot snapshot volume %s as %s: %s. Try again when it is written less",
				  v->name, snap, why);
	case -ENOBUFS:
		return errmsg_set(reterr_msg, r, "cannot snapshot volume %s as %s: %s. Raise NVMEVOL_CLONE_MEMORY_MB (now %llu)",
				  v->name, snap, why, (unsigned long long)m->cfg->clone_memory_mb);
	default:
		return errmsg_set(reterr_msg, r, "cannot snapshot volume %s as %s: %s", v->name, snap, why);
	}
}

static void default_name(char *buf, size_t len, Volume *v)
{
	time_t now = time(NULL);
	struct tm tm;

	strftime(buf, len, "%Y%m%dT%H%M%SZ", gmtime_r(&now, &tm));
	/* Two in one second: 20261201T174500Z-2, -3, ... */
	for (unsigned i = 2; find_snap(v, buf) && i < 1000; i++) {
		char base[24];

		strftime(base, sizeof(base), "%Y%m%dT%H%M%SZ", &tm);
		snprintf(buf, len, "%s-%u", base, i);
	}
}

/* Takes @s of volumes/<volume>, or (@tree_dirfd >= 0) of @tree in @tree_dirfd, a receive's new state. */
static int take(Manager *m, Volume *v, PartitionFs *fs, VolumeSnapshot *s, int tree_dirfd, const char *tree,
		char **reterr_msg)
{
	_cleanup_close_ int sfd = -EBADF, dfd = -EBADF;
	_cleanup_free_ char *why = NULL;
	const FreezeMarker marker = { .dir_fd = store_freeze_dir(m->store), .name = v->part->uuid };
	CloneParams p = { .freeze_budget_ms = (unsigned)m->cfg->clone_freeze_budget_ms,
			  .mem_max = m->cfg->clone_memory_mb << 20, .freeze_marker = &marker,
			  .writeback_wait_ms = CLONE_WRITEBACK_WAIT_MS };
	SnapDir d = SNAPDIR_NULL;
	CloneStats st = { 0 };
	char use[PATH_MAX + 128] = "";
	bool made_record = false, made_dir = false;
	struct stat a;
	int r;

	r = snapstore_open(fs, v->name, true, &d);
	if (r < 0) {
		/* What it made before it failed (snapshots/VOLUME, meta/): an empty one would stay in the way. */
		if (v->n_snaps == 0)
			snapstore_prune(fs, v->name);
		return errmsg_set(reterr_msg, r, "cannot make nvmevol/snapshots/%s on its partition: %s", v->name,
				  errno_str(r));
	}
	if (fstatat(d.data_fd, s->name, &a, AT_SYMLINK_NOFOLLOW) == 0) {
		r = errmsg_set(reterr_msg, -EEXIST,
			       "nvmevol/snapshots/%s/data/%s exists without a snapshot record (a leftover, or copied there "
			       "by hand): nvmevol leaves it alone; move it away, or give another name",
			       v->name, s->name);
		goto out;
	}
	s->state = SNAPSHOT_PENDING;
	s->at = (int64_t)time(NULL);
	made_record = true; /* even a failed atomic write may have renamed the file into place */
	r = snapstore_save(&d, v->name, s);
	if (r < 0) {
		r = errmsg_set(reterr_msg, r, "cannot write the snapshot's record: %s", errno_str(r));
		goto out;
	}
	if (mkdirat(d.data_fd, s->name, 0700) < 0) {
		r = errmsg_set(reterr_msg, negative_errno(), "cannot make the snapshot's directory: %s", errno_str(errno));
		goto out;
	}
	made_dir = true;
	sfd = tree_dirfd >= 0 ? openat(tree_dirfd, tree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
			      : openat(fs->volumes_fd, v->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	dfd = openat(d.data_fd, s->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0 || dfd < 0 || fstat(sfd, &a) < 0 || a.st_dev != fs->dev ||
	    (s->receive_root && a.st_ino != s->receive_root)) {
		r = errmsg_set(reterr_msg, -EXDEV, "cannot open volume %s or its snapshot directory on the partition",
			       v->name);
		goto out;
	}
	p.src_fd = sfd;
	p.dst_fd = dfd;
	p.freeze_fd = fs->root_fd;
	s->volume_in_use = manager_volume_known_in_use(v, fs, v->mounted || volume_mount_total(v) > 0, use, sizeof(use));
	/* Always frozen, in use or not: the plugin cannot see every writer (manager-clone.c). */
	r = clone_tree(&p, &st, &why);
	if (r < 0) {
		r = snap_error(m, v, s->name, r, why ? why : errno_str(r), reterr_msg);
		goto out;
	}
	s->state = SNAPSHOT_COMMITTED;
	s->at = st.at;
	s->frozen_ms = (uint32_t)((st.frozen_us + 999) / 1000);
	s->entries = st.files + st.dirs + st.symlinks + st.specials + st.hardlinks;
	s->bytes = st.bytes;
	s->cost_known = s->cost_complete = true; /* it shares every block at its instant */
	s->cost_bytes = 0;
	s->cost_at = st.at;
	r = snapstore_save(&d, v->name, s);
	if (r < 0) {
		r = errmsg_set(reterr_msg, r, "cannot commit the snapshot's record: %s", errno_str(r));
		goto out;
	}
	log_info("volume %s: snapshot %s taken: %llu entries, %llu bytes shared, %.1f ms frozen, %u freeze(s), %llu "
		 "bytes carried over%s%s",
		 v->name, s->name, (unsigned long long)s->entries, (unsigned long long)s->bytes, st.frozen_us / 1000.0,
		 st.freezes, (unsigned long long)st.delta_bytes, s->volume_in_use ? "; in use: " : "",
		 s->volume_in_use ? use : "");
	r = 0;
out:
	if (r < 0) {
		/* Undo exactly what this one did, newest first. */
		if (made_dir)
			(void)manager_snapshot_discard_dir(m, v, fs, d.data_fd, s->name);
		if (made_record)
			(void)snapstore_delete(&d, s->name);
		snapdir_done(&d);
		if (v->n_snaps == 0)
			snapstore_prune(fs, v->name);
		log_warning("volume %s: snapshot %s failed and was rolled back: %s", v->name, s->name,
			    reterr_msg && *reterr_msg ? *reterr_msg : errno_str(r));
		return r;
	}
	snapdir_done(&d);
	return 0;
}

static int create_fn(Manager *m, Volume *v, void *userdata, char **reterr_msg)
{
	SnapArgs *a = userdata;
	VolumeSnapshot s = { 0 };
	PartitionDevice dev;
	PartitionFs *fs;
	int r;

	if (a->snap)
		snprintf(s.name, sizeof(s.name), "%s", a->snap);
	else
		default_name(s.name, sizeof(s.name), v);
	s.temporary = a->temporary;
	s.by_move = a->by_move;
	s.evacuation = a->evacuation;
	s.receive_root = a->receive_root;
	if (a->id)
		snprintf(s.id, sizeof(s.id), "%s", a->id);
	else {
		uint8_t rnd[SNAPSHOT_ID_LEN / 2];

		if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
			return errmsg_set(reterr_msg, -EIO, "cannot draw a random snapshot ID");
		for (size_t i = 0; i < sizeof(rnd); i++)
			snprintf(s.id + 2 * i, 3, "%02x", rnd[i]);
	}
	if (find_snap(v, s.name))
		return errmsg_set(reterr_msg, -EEXIST, "volume %s already has a snapshot %s", v->name, s.name);
	if (v->n_snaps >= SNAPSHOTS_PER_VOLUME_MAX)
		return errmsg_set(reterr_msg, -EDQUOT,
				  "volume %s has %u snapshots, the most one volume may have; remove one first ('nvmevol "
				  "volume snapshot-rm %s SNAPSHOT')",
				  v->name, v->n_snaps, v->name);
	fs = manager_snapshot_writable_fs(m, v, "snapshot", reterr_msg);
	if (!fs)
		return -ENODEV;
	partition_device_snapshot(m->pool, v->part, &dev);
	if (dev.has_xfs && !dev.xfs.reflink) {
		partition_fs_put(fs);
		return errmsg_set(reterr_msg, -EOPNOTSUPP,
				  "cannot snapshot volume %s: its partition was made without reflink (xfs_info shows "
				  "reflink=0), so a snapshot could not share its blocks. Use a partition made with "
				  "mkfs.xfs -m reflink=1",
				  v->name);
	}
	r = take(m, v, fs, &s, a->receive_root ? a->tree_dirfd : -EBADF, a->tree, reterr_msg);
	partition_fs_put(fs);
	if (r < 0)
		return r;
	if (s.receive_root) {
		/* Not the volume's until its receive settles it (manager_snapshot_settle_received): not listed. */
		*a->ret = s;
		return 0;
	}
	r = change_snaps(m, v, &s, NULL);
	if (r < 0)
		/* On disk and committed: listed after the next start. */
		return errmsg_set(reterr_msg, r, "snapshot %s of %s was taken, but is listed only after a restart: %s",
				  s.name, v->name, errno_str(r));
	a->result = json_pack("{s:s,s:o}", "volume", v->name, "snapshot", snap_json(&s));
	return a->result ? 0 : -ENOMEM;
}

int manager_snapshot_create(Manager *m, const char *name, const char *snap, bool by_move, json_t **ret_result,
			    char **reterr_msg)
{
	SnapArgs a = { .snap = snap, .by_move = by_move };
	int r;

	if (snap && !volume_name_is_valid(snap))
		return errmsg_set(reterr_msg, -EINVAL, "invalid snapshot name '%s': 2 to 128 characters from "
				  "[A-Za-z0-9_.-], starting with a letter or digit", snap);
	r = manager_run_on_volume(m, name, false, create_fn, &a, reterr_msg);
	if (r < 0) {
		json_decref(a.result);
		return r;
	}
	*ret_result = a.result;
	return 0;
}

/* ---- list, with costs ---- */

typedef struct CostJob {
	char name[VOLUME_NAME_MAX + 1];
	CloneCost cost;
	bool measured;
} CostJob;

/* Measures each snapshot of @v against the volume, SNAPSHOT_COST_BUDGET_MS in all; no op_lock held. */
static void measure_costs(Manager *m, Volume *v, CostJob *jobs, size_t n)
{
	uint64_t start = freeze_now_us(), spent_ms;
	_cleanup_close_ int live = -EBADF;
	SnapDir d = SNAPDIR_NULL;
	PartitionFs *fs;

	fs = v->index_only ? NULL : partition_fs_get(m->pool, v->part);
	if (!fs)
		return;
	live = openat(fs->volumes_fd, v->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (live >= 0 && snapstore_open(fs, v->name, false, &d) == 0)
		for (size_t i = 0; i < n; i++) {
			_cleanup_close_ int sfd = -EBADF;
			_cleanup_free_ char *err = NULL;

			spent_ms = (freeze_now_us() - start) / 1000;
			if (spent_ms >= SNAPSHOT_COST_BUDGET_MS)
				break;
			sfd = openat(d.data_fd, jobs[i].name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			/* What is left of the budget, shared fairly by the snapshots still to measure. */
			if (sfd >= 0 &&
			    clone_cost(sfd, live, (unsigned)((SNAPSHOT_COST_BUDGET_MS - spent_ms) / (n - i)), &jobs[i].cost,
				       &err) == 0)
				jobs[i].measured = true;
		}
	snapdir_done(&d);
	partition_fs_put(fs);
}

int manager_snapshot_list(Manager *m, const char *name, json_t **ret_result, char **reterr_msg)
{
	_cleanup_(volume_unrefp) Volume *v = NULL;
	_cleanup_free_ CostJob *jobs = NULL;
	size_t n;
	json_t *arr, *j;

	if (!volume_name_is_valid(name))
		return errmsg_set(reterr_msg, -EINVAL, "invalid volume name");
	v = registry_lookup(m->reg, name);
	if (!v)
		return errmsg_set(reterr_msg, -ENOENT, "no such volume: %s", name);
	registry_read_lock(m->reg);
	n = v->n_snaps;
	jobs = calloc(n ? n : 1, sizeof(*jobs));
	for (size_t i = 0; jobs && i < n; i++)
		snprintf(jobs[i].name, sizeof(jobs[i].name), "%s", v->snaps[i].name);
	registry_unlock(m->reg);
	if (!jobs)
		return errmsg_set(reterr_msg, -ENOMEM, "out of memory");
	measure_costs(m, v, jobs, n);

	/* The cost fields are a cache: written under the registry lock alone (volume.h). */
	registry_write_lock(m->reg);
	for (size_t i = 0; i < n; i++) {
		VolumeSnapshot *s = jobs[i].measured ? find_snap(v, jobs[i].name) : NULL;

		if (!s)
			continue;
		s->cost_known = true;
		s->cost_complete = jobs[i].cost.complete;
		s->cost_bytes = jobs[i].cost.unshared_bytes;
		s->cost_at = (int64_t)time(NULL);
	}
	arr = json_array();
	for (size_t i = 0; arr && i < v->n_snaps; i++)
		json_array_append_new(arr, snap_json(&v->snaps[i]));
	registry_unlock(m->reg);
	j = arr ? json_pack("{s:s,s:o,s:i}", "volume", name, "snapshots", arr, "max", SNAPSHOTS_PER_VOLUME_MAX) : NULL;
	if (!j)
		return errmsg_set(reterr_msg, -ENOMEM, "out of memory");
	*ret_result = j;
	return 0;
}

int manager_bound_identity(json_t *j, int fd)
{
	struct stat st;
	char dev[32];

	if (fstat(fd, &st) < 0)
		return negative_errno();
	snprintf(dev, sizeof(dev), "%u:%u", major(st.st_dev), minor(st.st_dev));
	if (json_object_set_new(j, "dev", json_string(dev)) < 0 ||
	    json_object_set_new(j, "ino", json_integer((json_int_t)st.st_ino)) < 0)
		return -ENOMEM;
	return 0;
}

/* ---- exports: the bookkeeping ---- */

static void export_mount_name(const char *token, char buf[static 32])
{
	snprintf(buf, 32, ".export-%s", token);
}

/* Takes the binds of exports of @volume's @snap (NULL: any with @token) away and forgets them. */
static void drop_exports_matching(Manager *m, const char *volume, const char *snap, const char *token,
				  ManagerExport *ret_one)
{
	pthread_mutex_lock(&m->export_lock);
	for (size_t i = 0; i < m->n_exports;) {
		ManagerExport *e = &m->exports[i];
		char mnt[32];

		if (!streq(e->volume, volume) || (snap && !streq(e->snapshot, snap)) || (token && !streq(e->token, token))) {
			i++;
			continue;
		}
		export_mount_name(e->token, mnt);
		(void)bind_unmount(m->binds, mnt);
		if (ret_one)
			*ret_one = *e;
		m->exports[i] = m->exports[--m->n_exports];
	}
	pthread_mutex_unlock(&m->export_lock);
}

static void drop_exports(Manager *m, const char *volume, const char *snap)
{
	drop_exports_matching(m, volume, snap, NULL, NULL);
}

/* ---- remove ---- */

static int unknown_snapshot(Volume *v, const char *snap, char **reterr_msg)
{
	return errmsg_set(reterr_msg, -ENOENT, "volume %s has no snapshot %s (list them with 'nvmevol volume snapshots %s')",
			  v->name, snap, v->name);
}

/* @v's partition, writable (manager_snapshot_writable_fs), and its snapshots' directory in @d; an Err if not. */
static int open_store(Manager *m, Volume *v, const char *what, PartitionFs **ret_fs, SnapDir *d, char **reterr_msg)
{
	PartitionFs *fs = manager_snapshot_writable_fs(m, v, what, reterr_msg);
	int r;

	if (!fs)
		return -ENODEV;
	r = snapstore_open(fs, v->name, false, d);
	if (r < 0) {
		partition_fs_put(fs);
		return errmsg_set(reterr_msg, r, "cannot open nvmevol/snapshots/%s: %s", v->name, errno_str(r));
	}
	*ret_fs = fs;
	return 0;
}

static int remove_fn(Manager *m, Volume *v, void *userdata, char **reterr_msg)
{
	SnapArgs *a = userdata;
	VolumeSnapshot *cur = find_snap(v, a->snap), s;
	SnapDir d = SNAPDIR_NULL;
	PartitionFs *fs;
	int r;

	if (!cur)
		return unknown_snapshot(v, a->snap, reterr_msg);
	s = *cur;
	r = open_store(m, v, "remove a snapshot of", &fs, &d, reterr_msg);
	if (r < 0)
		return r;
	drop_exports(m, v->name, s.name);
	/* The commit point: from here on start-up finishes the remove. */
	s.state = SNAPSHOT_REMOVING;
	r = snapstore_save(&d, v->name, &s);
	if (r < 0) {
		r = errmsg_set(reterr_msg, r, "cannot write the snapshot's record: %s", errno_str(r));
		goto out;
	}
	r = manager_snapshot_discard_dir(m, v, fs, d.data_fd, s.name);
	if (r < 0) {
		r = errmsg_set(reterr_msg, r, "cannot move snapshot %s to the trash (its removal is finished at the next "
			       "start): %s", s.name, errno_str(r));
		goto out;
	}
	r = snapstore_delete(&d, s.name);
	if (r < 0)
		log_warning_errno(r, "volume %s: cannot delete the record of removed snapshot %s (deleted at the next start)",
				  v->name, s.name);
	r = change_snaps(m, v, NULL, s.name);
	if (r < 0) {
		r = errmsg_set(reterr_msg, r, "snapshot %s was removed, but is still listed until a restart", s.name);
		goto out;
	}
	snapdir_done(&d);
	if (v->n_snaps == 0)
		snapstore_prune(fs, v->name);
	log_info("volume %s: snapshot %s removed", v->name, s.name);
	a->result = json_pack("{s:s,s:s,s:s}", "volume", v->name, "snapshot", s.name, "result", "removed");
	r = a->result ? 0 : -ENOMEM;
out:
	snapdir_done(&d);
	partition_fs_put(fs);
	return r;
}

static int run_on_snapshot(Manager *m, const char *name, const char *snap, ManagerVolumeFn fn, json_t **ret_result,
			   char **reterr_msg)
{
	SnapArgs a = { .snap = snap };
	int r;

	if (!snap || !volume_name_is_valid(snap))
		return errmsg_set(reterr_msg, -EINVAL, "invalid snapshot name '%s': 2 to 128 characters from "
				  "[A-Za-z0-9_.-], starting with a letter or digit", snap ? snap : "");
	r = manager_run_on_volume(m, name, false, fn, &a, reterr_msg);
	if (r < 0) {
		json_decref(a.result);
		return r;
	}
	*ret_result = a.result;
	return 0;
}

int manager_snapshot_remove(Manager *m, const char *name, const char *snap, json_t **ret_result, char **reterr_msg)
{
	return run_on_snapshot(m, name, snap, remove_fn, ret_result, reterr_msg);
}

int manager_snapshot_remove_by_move(Manager *m, Volume *v, char **reterr_msg)
{
	for (;;) {
		char name[VOLUME_NAME_MAX + 1] = "";
		SnapArgs a = { .snap = name };
		int r;

		/* A copy of the name: the removal replaces v->snaps. */
		for (size_t i = 0; !name[0] && i < v->n_snaps; i++)
			if (v->snaps[i].by_move)
				snprintf(name, sizeof(name), "%s", v->snaps[i].name);
		if (!name[0])
			return 0;
		/* Each one its own commit point (remove_fn): a crash between two leaves the volume with fewer. */
		r = remove_fn(m, v, &a, reterr_msg);
		json_decref(a.result);
		if (r < 0)
			return r;
	}
}

/* ---- rollback ---- */

/* Builds the snapshot's copy in snapshots/<volume>/@dir, in the volume's project. */
static int build_copy(Manager *m, Volume *v, PartitionFs *fs, SnapDir *d, const VolumeSnapshot *s, const char *dir,
		      bool charge, char **reterr_msg)
{
	_cleanup_close_ int sfd = -EBADF, rfd = -EBADF;
	_cleanup_free_ char *why = NULL;
	CloneParams p = { .freeze_fd = -EBADF, .mem_max = m->cfg->clone_memory_mb << 20 };
	CloneStats st = { 0 };
	uint64_t tagged = 0;
	int r;

	sfd = openat(d->data_fd, s->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot open snapshot %s: %s", s->name, errno_str(errno));
	if (mkdirat(d->vol_fd, dir, 0700) < 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot make nvmevol/snapshots/%s/%s: %s", v->name, dir,
				  errno_str(errno));
	rfd = openat(d->vol_fd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rfd < 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot open nvmevol/snapshots/%s/%s: %s", v->name, dir,
				  errno_str(errno));
	/* Nothing writes to a snapshot: no freeze. Its files come in project 0 (and are charged below if asked). */
	p.src_fd = sfd;
	p.dst_fd = rfd;
	r = clone_tree(&p, &st, &why);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot copy snapshot %s: %s", s->name, why ? why : errno_str(r));
	if (charge && v->projid) {
		/*
		 * Tagged as root (CAP_FOWNER): XFS lets the charge pass a hard limit,
		 * so a rollback never fails for the moment the volume holds both states.
		 */
		r = sizelimit_tag_tree(fs, rfd, v->projid, &tagged, reterr_msg);
		if (r < 0)
			return r;
		if (syncfs(rfd) < 0)
			return errmsg_set(reterr_msg, negative_errno(), "cannot sync the partition: %s", errno_str(errno));
	}
	return 0;
}

int manager_snapshot_build_copy(Manager *m, Volume *v, PartitionFs *fs, const VolumeSnapshot *s, const char *dir,
				bool charge, char **reterr_msg)
{
	SnapDir d = SNAPDIR_NULL;
	int r;

	r = snapstore_open(fs, v->name, false, &d);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot open nvmevol/snapshots/%s: %s", v->name, errno_str(r));
	r = build_copy(m, v, fs, &d, s, dir, charge, reterr_msg);
	snapdir_done(&d);
	return r;
}

int manager_snapshot_take_locked(Manager *m, Volume *v, const char *snap, const char *id, bool by_move,
				 char **reterr_msg)
{
	SnapArgs a = { .snap = snap, .id = id, .by_move = by_move };
	int r = create_fn(m, v, &a, reterr_msg);

	json_decref(a.result);
	return r;
}

int manager_snapshot_take_for_evacuation(Manager *m, Volume *v, const char *snap, VolumeSnapshot *ret,
					 char **reterr_msg)
{
	SnapArgs a = { .snap = snap, .evacuation = true };
	VolumeSnapshot *s;
	int r = create_fn(m, v, &a, reterr_msg);

	json_decref(a.result);
	if (r < 0)
		return r;
	s = find_snap(v, snap);
	if (!s)
		return errmsg_set(reterr_msg, -ENOENT, "snapshot %s of %s was taken but is not listed", snap, v->name);
	*ret = *s;
	return 0;
}

int manager_snapshot_remove_locked(Manager *m, Volume *v, const char *snap, char **reterr_msg)
{
	SnapArgs a = { .snap = snap };
	int r = remove_fn(m, v, &a, reterr_msg);

	json_decref(a.result);
	return r;
}

int manager_snapshot_take_received(Manager *m, Volume *v, int tree_dirfd, const char *tree, const char *snap,
				   const char *id, bool by_move, VolumeSnapshot *ret, char **reterr_msg)
{
	SnapArgs a = { .snap = snap, .id = id, .by_move = by_move, .tree_dirfd = tree_dirfd, .tree = tree, .ret = ret };
	struct stat st;
	int r;

	if (fstatat(tree_dirfd, tree, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_ino == 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot look at the received state of volume %s: %s",
				  v->name, errno_str(errno));
	a.receive_root = (uint64_t)st.st_ino;
	r = create_fn(m, v, &a, reterr_msg);
	json_decref(a.result);
	return r;
}

int manager_snapshot_settle_received(Manager *m, Volume *v, VolumeSnapshot *s, bool committed, char **reterr_msg)
{
	SnapDir d = SNAPDIR_NULL;
	PartitionFs *fs = NULL;
	int r;

	r = open_store(m, v, committed ? "commit the received snapshot of" : "drop the received snapshot of", &fs, &d,
		       reterr_msg);
	if (r < 0)
		return r;
	if (!committed) {
		r = drop_snapshot(m, v->part, fs, &d, s->name);
		if (r < 0)
			r = errmsg_set(reterr_msg, r, "cannot delete snapshot %s (deleted at the next start): %s", s->name,
				       errno_str(r));
		snapdir_done(&d);
		if (v->n_snaps == 0)
			snapstore_prune(fs, v->name);
		goto out;
	}
	/* The mark's clear: one atomic record write. From here on the snapshot is the volume's. */
	s->receive_root = 0;
	r = snapstore_save(&d, v->name, s);
	if (r < 0) {
		r = errmsg_set(reterr_msg, r, "cannot commit the record of snapshot %s: %s", s->name, errno_str(r));
		goto out;
	}
	r = change_snaps(m, v, s, NULL);
	if (r < 0)
		r = errmsg_set(reterr_msg, r, "snapshot %s of %s was taken, but is listed only after a restart: %s",
			       s->name, v->name, errno_str(r));
out:
	snapdir_done(&d);
	partition_fs_put(fs);
	return r;
}

VolumeSnapshot *manager_snapshot_find_id(Volume *v, const char *id)
{
	for (size_t i = 0; i < v->n_snaps; i++)
		if (v->snaps[i].id[0] && streq(v->snaps[i].id, id))
			return &v->snaps[i];
	return NULL;
}

static void restore_root_times(int from_dir, const char *from, int to_dir, const char *to)
{
	struct stat st;

	if (fstatat(from_dir, from, &st, AT_SYMLINK_NOFOLLOW) == 0)
		(void)utimensat(to_dir, to, (const struct timespec[2]){ st.st_atim, st.st_mtim }, AT_SYMLINK_NOFOLLOW);
}

static int rollback_fn(Manager *m, Volume *v, void *userdata, char **reterr_msg)
{
	SnapArgs *a = userdata;
	VolumeSnapshot *s = find_snap(v, a->snap);
	SnapDir d = SNAPDIR_NULL;
	char use[PATH_MAX + 128] = "", entry[TRASH_ENTRY_MAX];
	PartitionFs *fs;
	uint64_t t0 = freeze_now_us();
	bool in_use;
	int r;

	if (!s)
		return unknown_snapshot(v, a->snap, reterr_msg);
	if (s->data_missing)
		return errmsg_set(reterr_msg, -ENOENT, "snapshot %s of volume %s has lost its data directory; it cannot "
				  "be rolled back to", s->name, v->name);
	fs = manager_snapshot_writable_fs(m, v, "roll back", reterr_msg);
	if (!fs)
		return -ENODEV;
	/* From the kernel, as a clone decides it: the plugin's count, or a bind seen in a mount namespace. */
	in_use = manager_volume_known_in_use(v, fs, v->mounted || volume_mount_total(v) > 0, use, sizeof(use));
	if (in_use) {
		r = errmsg_set(reterr_msg, -EBUSY,
			       "cannot roll volume %s back while it is in use: %s. Stop the containers that use it, then "
			       "roll back (take a snapshot first if you want to keep its present state)",
			       v->name, use);
		goto out;
	}
	r = snapstore_open(fs, v->name, false, &d);
	if (r < 0) {
		r = errmsg_set(reterr_msg, r, "cannot open nvmevol/snapshots/%s: %s", v->name, errno_str(r));
		goto out;
	}
	/* A leftover of an interrupted rollback is never the live volume. */
	(void)manager_snapshot_discard_dir(m, v, fs, d.vol_fd, SNAPSTORE_ROLLBACK);
	r = build_copy(m, v, fs, &d, s, SNAPSTORE_ROLLBACK, true, reterr_msg);
	if (r < 0) {
		(void)manager_snapshot_discard_dir(m, v, fs, d.vol_fd, SNAPSTORE_ROLLBACK);
		goto out;
	}
	/* The commit point: one atomic swap. The previous state is now in rollback/. */
	if (renameat2(d.vol_fd, SNAPSTORE_ROLLBACK, fs->volumes_fd, v->name, RENAME_EXCHANGE) < 0) {
		r = errmsg_set(reterr_msg, negative_errno(), "cannot swap volume %s with its rollback: %s", v->name,
			       errno_str(errno));
		(void)manager_snapshot_discard_dir(m, v, fs, d.vol_fd, SNAPSTORE_ROLLBACK);
		goto out;
	}
	if (fsync(fs->volumes_fd) < 0 || fsync(d.vol_fd) < 0)
		log_warning_errno(errno, "volume %s: cannot sync the rollback's rename", v->name);
	/* A directory moved to another parent gets new times (its ".." changed): the snapshot's, again. */
	restore_root_times(d.data_fd, s->name, fs->volumes_fd, v->name);
	/*
	 * The previous state is deleted now, under op_lock (the volume is not in
	 * use): while it exists it is charged to the volume's project too.
	 */
	r = trash_move_in(fs, d.vol_fd, SNAPSTORE_ROLLBACK, entry);
	if (r == 0) {
		PartitionInfo info;

		(void)fsync(fs->trash_fd);
		(void)fsync(d.vol_fd);
		if (rm_rf_at(fs->trash_fd, entry) < 0) {
			partition_snapshot(m->pool, v->part, &info);
			(void)trash_enqueue(m->trash, fs, info.uuid, entry);
		}
	} else
		log_warning_errno(r, "volume %s: the state before the rollback stays in nvmevol/snapshots/%s/" SNAPSTORE_ROLLBACK
				  " until the next start", v->name, v->name);
	log_info("volume %s: rolled back to snapshot %s in %.1f ms", v->name, s->name, (freeze_now_us() - t0) / 1000.0);
	a->result = json_pack("{s:s,s:s,s:s}", "volume", v->name, "snapshot", s->name, "result", "rolled back");
	r = a->result ? 0 : -ENOMEM;
out:
	snapdir_done(&d);
	partition_fs_put(fs);
	return r;
}

int manager_rollback(Manager *m, const char *name, const char *snap, json_t **ret_result, char **reterr_msg)
{
	return run_on_snapshot(m, name, snap, rollback_fn, ret_result, reterr_msg);
}

/* ---- export ---- */

static int export_open_fn(Manager *m, Volume *v, void *userdata, char **reterr_msg)
{
	SnapArgs *a = userdata;
	_cleanup_close_ int src = -EBADF;
	ManagerExport e = { 0 };
	SnapDir d = SNAPDIR_NULL;
	VolumeSnapshot *s;
	PartitionFs *fs = NULL;
	uint64_t rnd = 0;
	char mnt[32], temp[32];
	int r;

	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		return errmsg_set(reterr_msg, -EIO, "cannot draw a random export token");
	snprintf(e.token, sizeof(e.token), "%016llx", (unsigned long long)rnd);
	snprintf(e.volume, sizeof(e.volume), "%s", v->name);
	if (!a->snap) {
		/* One instant, in use or not: a temporary snapshot, the frozen path. */
		SnapArgs t = { .snap = temp, .temporary = true };

		snprintf(temp, sizeof(temp), "export-%s", e.token);
		r = create_fn(m, v, &t, reterr_msg);
		json_decref(t.result);
		if (r < 0)
			return r;
		e.temporary = true;
	}
	snprintf(e.snapshot, sizeof(e.snapshot), "%s", a->snap ? a->snap : temp);
	s = find_snap(v, e.snapshot);
	if (!s) {
		r = unknown_snapshot(v, e.snapshot, reterr_msg);
		goto fail;
	}
	if (s->data_missing) {
		r = errmsg_set(reterr_msg, -ENOENT, "snapshot %s of volume %s has lost its data directory", s->name, v->name);
		goto fail;
	}
	fs = manager_snapshot_writable_fs(m, v, "export", reterr_msg);
	if (!fs) {
		r = -ENODEV;
		goto fail;
	}
	r = snapstore_open(fs, v->name, false, &d);
	if (r == 0) {
		src = openat(d.data_fd, s->name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		r = src < 0 ? negative_errno() : 0;
	}
	snapdir_done(&d);
	if (r < 0) {
		r = errmsg_set(reterr_msg, r, "cannot open snapshot %s: %s", s->name, errno_str(r));
		goto fail;
	}
	export_mount_name(e.token, mnt);
	r = bind_mount_dir(m->binds, mnt, src, MOUNT_BIND_RDONLY | MOUNT_BIND_NOSUID | MOUNT_BIND_NODEV, reterr_msg);
	if (r < 0)
		goto fail;
	pthread_mutex_lock(&m->export_lock);
	r = GROW_ARRAY(m->exports, m->cap_exports, m->n_exports + 1, 4);
	if (r >= 0)
		m->exports[m->n_exports++] = e;
	pthread_mutex_unlock(&m->export_lock);
	if (r < 0) {
		(void)bind_unmount(m->binds, mnt);
		r = errmsg_set(reterr_msg, -ENOMEM, "out of memory");
		goto fail;
	}
	a->result = json_pack("{s:s,s:s,s:b,s:s,s:s,s:s,s:s,s:o}", "volume", v->name, "snapshot", e.snapshot,
			      "temporary", e.temporary, "token", e.token, "mount", mnt, "propagated_mount",
			      m->cfg->propagated_mount, "id", s->id, "options", volume_options_to_json(v->opts));
	if (a->result && s->by_move)
		json_object_set_new(a->result, "by_move", json_true());
	if (a->result && manager_bound_identity(a->result, src) < 0) {
		json_decref(a->result);
		a->result = NULL;
	}
	partition_fs_put(fs);
	log_info("volume %s: snapshot %s bound read-only for an export (token %s)", v->name, e.snapshot, e.token);
	return a->result ? 0 : -ENOMEM;
fail:
	partition_fs_put(fs);
	if (e.temporary) {
		SnapArgs t = { .snap = temp };
		_cleanup_free_ char *ignored = NULL;

		(void)remove_fn(m, v, &t, &ignored);
		json_decref(t.result);
	}
	return r;
}

int manager_export_open(Manager *m, const char *name, const char *snap, json_t **ret_result, char **reterr_msg)
{
	SnapArgs a = { .snap = snap };
	int r;

	if (snap && !volume_name_is_valid(snap))
		return errmsg_set(reterr_msg, -EINVAL, "invalid snapshot name '%s'", snap);
	r = manager_run_on_volume(m, name, false, export_open_fn, &a, reterr_msg);
	if (r < 0) {
		json_decref(a.result);
		return r;
	}
	*ret_result = a.result;
	return 0;
}

static int export_close_fn(Manager *m, Volume *v, void *userdata, char **reterr_msg)
{
	SnapArgs *a = userdata;
	ManagerExport e = { 0 };
	int r = 0;

	drop_exports_matching(m, v->name, NULL, a->token, &e);
	if (!e.token[0])
		return errmsg_set(reterr_msg, -ENOENT, "volume %s has no export %s (it ended, or the plugin restarted)",
				  v->name, a->token);
	if (e.temporary && find_snap(v, e.snapshot)) {
		SnapArgs t = { .snap = e.snapshot };

		r = remove_fn(m, v, &t, reterr_msg);
		json_decref(t.result);
	}
	if (r < 0)
		return r;
	a->result = json_pack("{s:s,s:s,s:s}", "volume", v->name, "token", e.token, "result", "closed");
	return a->result ? 0 : -ENOMEM;
}

int manager_export_close(Manager *m, const char *name, const char *token, json_t **ret_result, char **reterr_msg)
{
	SnapArgs a = { .token = token };
	int r;

	r = manager_run_on_volume(m, name, false, export_close_fn, &a, reterr_msg);
	if (r < 0) {
		json_decref(a.result);
		return r;
	}
	*ret_result = a.result;
	return 0;
}

/* ---- loading and recovery ---- */

typedef struct LoadCtx {
	Volume *v;
	const VolumeSnapshot *older; /* snapshots of an earlier volume of this name: reported once, not as orphans */
	size_t n_older;
} LoadCtx;

static void damaged_record(const char *file, const char *why, void *userdata)
{
	LoadCtx *c = userdata;

	log_error("volume %s: snapshot record nvmevol/snapshots/%s/meta/%s is unreadable (%s); it is ignored and "
		  "its data, if any, kept", c->v->name, c->v->name, file, why);
}

static int orphan_data(const char *name, void *userdata)
{
	LoadCtx *c = userdata;

	for (size_t i = 0; i < c->n_older; i++)
		if (streq(c->older[i].name, name))
			return 0;

	log_warning("volume %s: nvmevol/snapshots/%s/data/%s has no snapshot record; left alone (not a snapshot)",
		    c->v->name, c->v->name, name);
	return 0;
}

void manager_snapshot_load(Manager *m, Volume *v, PartitionFs *fs, bool recover)
{
	LoadCtx c = { .v = v };
	SnapDir d = SNAPDIR_NULL;
	VolumeSnapshot *snaps = NULL, *older = NULL;
	struct stat st;
	size_t n = 0, k = 0;
	int r;

	r = snapstore_open(fs, v->name, false, &d);
	if (r == -ENOENT)
		return;
	if (r < 0) {
		log_error_errno(r, "volume %s: cannot open its snapshots", v->name);
		return;
	}
	r = snapstore_load(&d, v->name, damaged_record, &c, &snaps, &n);
	if (r < 0) {
		log_error_errno(r, "volume %s: cannot read its snapshot records", v->name);
		snapdir_done(&d);
		return;
	}
	older = calloc(n ? n : 1, sizeof(*older));
	if (!older) {
		log_error("volume %s: out of memory loading its snapshots", v->name);
		free(snaps);
		snapdir_done(&d);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		VolumeSnapshot *s = &snaps[i];

		/*
		 * Older than the volume: a snapshot of an earlier volume of this name, which an nvmevol that
		 * could not read its record (one without snapshot IDs, or 0.1, which has no snapshots) let
		 * be removed. Never this volume's to list or roll back to; its data is left alone.
		 */
		if (s->state == SNAPSHOT_COMMITTED && v->created_at > 0 && s->at < v->created_at) {
			log_error("volume %s: snapshot %s is older than the volume (taken %lld, the volume created %lld): "
				  "it belongs to an earlier volume of this name, removed while its snapshots could not be "
				  "read (an older nvmevol); not listed and left alone in nvmevol/snapshots/%s/ (data/%s, "
				  "meta/%s.json): copy what is needed from it, then delete both", v->name, s->name,
				  (long long)s->at, (long long)v->created_at, v->name, s->name, s->name);
			older[c.n_older++] = *s;
			continue;
		}
		if (s->state == SNAPSHOT_COMMITTED && s->receive_root) {
			/*
			 * A receive's, taken of its new state before the commit: the volume's if the commit
			 * happened (volumes/<volume> is that tree now), else never was. Settled before anything
			 * is served or listed; unsettled (read-only partition) it is not listed.
			 */
			if (!recover)
				continue;
			if (fstatat(fs->volumes_fd, v->name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    (uint64_t)st.st_ino == s->receive_root) {
				s->receive_root = 0;
				r = snapstore_save(&d, v->name, s);
				if (r < 0) {
					log_error_errno(r, "volume %s: cannot clear the receive's mark of snapshot %s; not "
							"listed until a start clears it", v->name, s->name);
					continue;
				}
				log_info("volume %s: snapshot %s of an interrupted receive is kept: its state was "
					 "committed", v->name, s->name);
				snaps[k++] = *s;
				continue;
			}
			log_info("volume %s: snapshot %s of an interrupted receive is deleted: its state was never "
				 "committed", v->name, s->name);
			(void)drop_snapshot(m, v->part, fs, &d, s->name);
			continue;
		}
		if (s->state == SNAPSHOT_COMMITTED && !(s->temporary && recover)) {
			if (s->data_missing)
				log_error("volume %s: snapshot %s is committed but its data directory is missing; listed "
					  "with that problem until it is removed", v->name, s->name);
			snaps[k++] = *s;
			continue;
		}
		/*
		 * Pending: never committed. Removing: committed for removal. Temporary:
		 * its export ended with the process that served it. Either way its data goes.
		 */
		if (!recover)
			continue; /* not listed; settled at the next start */
		log_info("volume %s: snapshot %s was %s; deleting it", v->name, s->name,
			 s->state == SNAPSHOT_PENDING ? "interrupted before its commit"
			 : s->state == SNAPSHOT_REMOVING ? "interrupted in its removal" : "taken for an export that ended");
		(void)drop_snapshot(m, v->part, fs, &d, s->name);
	}
	c.older = older;
	if (recover) {
		(void)snapstore_foreach_orphan(&d, snaps, k, orphan_data, &c);
		manager_receive_cleanup(m, v, fs, d.vol_fd);
		if (fstatat(d.vol_fd, SNAPSTORE_ROLLBACK, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			log_info("volume %s: deleting what an interrupted rollback left (never the live volume)", v->name);
			(void)manager_snapshot_discard_dir(m, v, fs, d.vol_fd, SNAPSTORE_ROLLBACK);
		}
	}
	snapdir_done(&d);
	free(older);
	if (k == 0) {
		free(snaps);
		snaps = NULL;
		if (recover)
			snapstore_prune(fs, v->name);
	}
	set_snaps(m, v, snaps, k);
}

void manager_snapshot_drop_received(Manager *m, Partition *part, PartitionFs *fs, const char *volume)
{
	SnapDir d = SNAPDIR_NULL;
	VolumeSnapshot *snaps = NULL;
	size_t n = 0;

	if (fs->read_only || snapstore_open(fs, volume, false, &d) < 0)
		return;
	if (snapstore_load(&d, volume, NULL, NULL, &snaps, &n) == 0)
		for (size_t i = 0; i < n; i++)
			if (snaps[i].receive_root) {
				/* A full receive's, whose volume's record was never written: the commit did not happen. */
				log_info("volume %s: snapshot %s of a receive interrupted before its volume's commit is "
					 "deleted", volume, snaps[i].name);
				(void)drop_snapshot(m, part, fs, &d, snaps[i].name);
			}
	free(snaps);
	snapdir_done(&d);
}
