/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include "manager.h"
#include "manager-internal.h"
#include "mount.h"
#include "pool.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/log.h"
#include "util/macro.h"

#define RESCAN_INTERVAL_MS 1000

int manager_new(const Config *cfg, Manager **ret)
{
	Manager *m = calloc(1, sizeof(*m));
	int r;

	if (!m)
		return -ENOMEM;
	m->cfg = cfg;
	m->state_fd = m->index_fd = m->mounts_fd = m->lock_fd = m->prop_fd = -EBADF;
	pthread_rwlock_init(&m->reg_lock, NULL);
	pthread_mutex_init(&m->create_lock, NULL);
	r = pool_new(cfg, &m->pool);
	if (r < 0) {
		manager_free(m);
		return r;
	}
	*ret = m;
	return 0;
}

Manager *manager_free(Manager *m)
{
	if (!m)
		return NULL;
	for (size_t i = 0; i < m->n_vols; i++)
		volume_unref(m->vols[i]);
	free(m->vols);
	pool_free(m->pool);
	if (m->state_fd >= 0)
		close(m->state_fd);
	if (m->index_fd >= 0)
		close(m->index_fd);
	if (m->mounts_fd >= 0)
		close(m->mounts_fd);
	if (m->lock_fd >= 0)
		close(m->lock_fd);
	if (m->prop_fd >= 0)
		close(m->prop_fd);
	pthread_rwlock_destroy(&m->reg_lock);
	pthread_mutex_destroy(&m->create_lock);
	free(m);
	return NULL;
}

/* ---- registry: a sorted array, binary search by name ---- */

static size_t reg_lower_bound(Manager *m, const char *name)
{
	size_t lo = 0, hi = m->n_vols;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (strcmp(m->vols[mid]->name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

Volume *reg_find_locked(Manager *m, const char *name)
{
	size_t i = reg_lower_bound(m, name);
	return i < m->n_vols && streq(m->vols[i]->name, name) ? m->vols[i] : NULL;
}

int reg_insert_locked(Manager *m, Volume *v)
{
	size_t i = reg_lower_bound(m, v->name);

	if (i < m->n_vols && streq(m->vols[i]->name, v->name))
		return -EEXIST;
	if (m->n_vols == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 64;
		Volume **nv = realloc(m->vols, cap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		m->vols = nv;
		m->cap = cap;
	}
	memmove(&m->vols[i + 1], &m->vols[i], (m->n_vols - i) * sizeof(*m->vols));
	m->vols[i] = volume_ref(v);
	m->n_vols++;
	return 0;
}

void reg_remove_locked(Manager *m, Volume *v)
{
	size_t i = reg_lower_bound(m, v->name);

	if (i < m->n_vols && m->vols[i] == v) {
		memmove(&m->vols[i], &m->vols[i + 1], (m->n_vols - i - 1) * sizeof(*m->vols));
		m->n_vols--;
		volume_unref(v);
	}
}

Volume *lookup(Manager *m, const char *name)
{
	Volume *v;

	pthread_rwlock_rdlock(&m->reg_lock);
	v = reg_find_locked(m, name);
	if (v)
		volume_ref(v);
	pthread_rwlock_unlock(&m->reg_lock);
	return v;
}

size_t manager_count(Manager *m)
{
	size_t n;

	pthread_rwlock_rdlock(&m->reg_lock);
	n = m->n_vols;
	pthread_rwlock_unlock(&m->reg_lock);
	return n;
}

/* ---- persistence ---- */

static void record_filename(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s.json", name);
}

int save_record(Manager *m, Volume *v)
{
	_cleanup_free_ char *s = NULL;
	char fn[VOLUME_NAME_MAX + 8];

	if (!v->part || v->part->meta_fd < 0)
		return -ENODEV;
	pthread_rwlock_rdlock(&m->reg_lock);
	s = volume_record_dump(v, false);
	pthread_rwlock_unlock(&m->reg_lock);
	if (!s)
		return -ENOMEM;
	record_filename(v->name, fn, sizeof(fn));
	return write_file_atomic_at(v->part->meta_fd, fn, s, strlen(s), 0600);
}

int save_mounts(Manager *m, Volume *v)
{
	_cleanup_free_ char *s = NULL;
	char fn[VOLUME_NAME_MAX + 8];
	unsigned total;

	record_filename(v->name, fn, sizeof(fn));
	pthread_rwlock_rdlock(&m->reg_lock);
	total = volume_mount_total(v);
	s = total > 0 ? volume_record_dump(v, true) : NULL;
	pthread_rwlock_unlock(&m->reg_lock);
	if (total == 0)
		return unlink_durable_at(m->mounts_fd, fn);
	if (!s)
		return -ENOMEM;
	/*
	 * Counts live in the host's state directory, not on the partition: a Mount
	 * must still work when the volume's own partition is full.
	 */
	return write_file_atomic_at(m->mounts_fd, fn, s, strlen(s), 0600);
}

int save_index(Manager *m, Volume *v)
{
	_cleanup_free_ char *s = NULL;
	char fn[VOLUME_NAME_MAX + 8];
	VolumeState saved;

	pthread_rwlock_rdlock(&m->reg_lock);
	/* The index only says "this volume exists, on that partition". */
	saved = v->state;
	v->state = VOLUME_READY;
	s = volume_record_dump(v, false);
	v->state = saved;
	pthread_rwlock_unlock(&m->reg_lock);
	if (!s)
		return -ENOMEM;
	record_filename(v->name, fn, sizeof(fn));
	return write_file_atomic_at(m->index_fd, fn, s, strlen(s), 0600);
}

static int delete_record(Partition *part, const char *name)
{
	char fn[VOLUME_NAME_MAX + 8];

	record_filename(name, fn, sizeof(fn));
	return unlink_durable_at(part->meta_fd, fn);
}

static int delete_index(Manager *m, const char *name)
{
	char fn[VOLUME_NAME_MAX + 8];

	record_filename(name, fn, sizeof(fn));
	return unlink_durable_at(m->index_fd, fn);
}

/* ---- create ---- */

static Partition *choose_partition(Manager *m, const VolumeOptions *o, char **reterr_msg)
{
	Partition *part;

	for (int attempt = 0; attempt < 2; attempt++) {
		part = o->partition[0] ? pool_find_ref(m->pool, o->partition) : pool_pick_most_free(m->pool);
		/* A partition shut down by an I/O error is still "present" until someone looks. */
		if (part && partition_verify_recent(m->pool, part, 1000))
			return part;
		/* The host may have added a partition since the last scan. */
		(void)pool_rescan_if_stale(m->pool, RESCAN_INTERVAL_MS);
	}
	if (o->partition[0]) {
		_cleanup_free_ char *avail = pool_describe(m->pool);
		Partition *known = pool_find_ref_any(m->pool, o->partition);

		if (known)
			errmsg_set(reterr_msg, -ENODEV, "partition '%s' (UUID %s) is not available: %s; available: %s",
				   o->partition, known->uuid, known->problem ? known->problem : "not detected",
				   avail ? avail : "?");
		else
			errmsg_set(reterr_msg, -ENODEV, "no nvmevol partition has the label or UUID '%s'; available: %s",
				   o->partition, avail ? avail : "?");
	} else
		errmsg_set(reterr_msg, -ENODEV,
			"no nvmevol partition is available: format one with 'mkfs.xfs -L %sNAME DEVICE' "
			"(labels starting with '%s' are used) or list devices in NVMEVOL_DEVICES",
			m->cfg->label_prefix[0] ? m->cfg->label_prefix : "nvmevol-",
			m->cfg->label_prefix);
	return NULL;
}

static int rollback_create(Manager *m, Volume *v, bool made_dir)
{
	if (made_dir)
		(void)rm_rf_at(v->part->volumes_fd, v->name);
	(void)fsync(v->part->volumes_fd);
	(void)delete_index(m, v->name);
	return delete_record(v->part, v->name);
}

static int make_volume_dir(Manager *m, Volume *v, char **reterr_msg)
{
	_cleanup_close_ int fd = -EBADF;
	struct stat st;
	int r;

	r = mkdirat(v->part->volumes_fd, v->name, 0700);
	if (r < 0)
		return errmsg_set(reterr_msg, negative_errno(),
			       "cannot create the volume directory on partition %s: %s%s", v->part->label,
			       strerror(errno),
			       errno == EEXIST ? " (a leftover directory with that name exists; see the quarantine)" : "");
	fd = openat(v->part->volumes_fd, v->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_dev != v->part->dev)
		return errmsg_set(reterr_msg, fd < 0 ? negative_errno() : -EXDEV,
			       "the new volume directory changed under nvmevol");
	if (fchown(fd, v->opts.has_uid ? v->opts.uid : 0, v->opts.has_gid ? v->opts.gid : 0) < 0 ||
	    fchmod(fd, v->opts.has_mode ? v->opts.mode : 0755) < 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot set owner or mode of the volume directory: %s",
			       strerror(errno));
	r = quota_apply_create(m, v, fd, reterr_msg);
	if (r < 0)
		return r;
	if (fsync(fd) < 0 || fsync(v->part->volumes_fd) < 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot sync the volume directory: %s", strerror(errno));
	return 0;
}

int manager_create(Manager *m, const char *name, const VolumeOptions *opts, char **reterr_msg)
{
	_cleanup_(volume_unrefp) Volume *existing = NULL;
	_cleanup_(volume_unrefp) Volume *v = NULL;
	Partition *part;
	bool made_dir = false;
	int r;

	if (!volume_name_is_valid(name))
		return errmsg_set(reterr_msg, -EINVAL, "invalid volume name");

	pthread_mutex_lock(&m->create_lock);
	existing = lookup(m, name);
	if (existing) {
		_cleanup_free_ char *diff = NULL;

		if (existing->corrupt)
			r = errmsg_set(reterr_msg, -EUCLEAN, "volume %s exists but its record is unreadable (%s)", name,
				    existing->corrupt);
		else if (existing->state != VOLUME_READY)
			r = errmsg_set(reterr_msg, -EBUSY, "volume %s is being %s; try again", name,
				    volume_state_to_string(existing->state));
		else if ((diff = volume_options_diff(&existing->opts, opts)))
			r = errmsg_set(reterr_msg, -EEXIST, "volume %s already exists with different options: %s", name,
				    diff);
		else
			r = 0;
		goto out;
	}
	if (manager_count(m) >= m->cfg->max_volumes) {
		r = errmsg_set(reterr_msg, -EDQUOT, "the limit of %llu volumes is reached (NVMEVOL_MAX_VOLUMES)",
			    (unsigned long long)m->cfg->max_volumes);
		goto out;
	}
	part = choose_partition(m, opts, reterr_msg);
	if (!part) {
		r = -ENODEV;
		goto out;
	}
	r = quota_check_create(m, part, opts, reterr_msg);
	if (r < 0)
		goto out;

	v = volume_new(name);
	if (!v) {
		r = errmsg_set(reterr_msg, -ENOMEM, "out of memory");
		goto out;
	}
	v->state = VOLUME_CREATING;
	v->opts = *opts;
	v->part = part;
	snprintf(v->partition_uuid, sizeof(v->partition_uuid), "%s", part->uuid);
	snprintf(v->partition_label, sizeof(v->partition_label), "%s", part->label);
	v->created_at = (int64_t)time(NULL);

	/*
	 * Order: index entry, directory, record. The record on the partition is the
	 * commit point: a crash before it leaves an index entry whose partition has
	 * no record (dropped at start) and an empty directory without a record
	 * (removed at start); neither is ever visible.
	 */
	r = save_index(m, v);
	if (r < 0) {
		errmsg_set(reterr_msg, r, "cannot write the volume index in %s: %s", m->cfg->state_dir, strerror(-r));
		goto rollback;
	}
	r = make_volume_dir(m, v, reterr_msg);
	made_dir = r != -EEXIST;
	if (r < 0)
		goto rollback;
	v->state = VOLUME_READY;
	r = save_record(m, v);
	if (r < 0) {
		errmsg_set(reterr_msg, r, "cannot commit the volume record on partition %s: %s", part->label,
			strerror(-r));
		goto rollback;
	}
	pthread_rwlock_wrlock(&m->reg_lock);
	r = reg_insert_locked(m, v);
	pthread_rwlock_unlock(&m->reg_lock);
	if (r < 0) {
		errmsg_set(reterr_msg, r, "cannot register the volume: %s", strerror(-r));
		goto rollback;
	}
	log_info("volume %s: created on partition %s (UUID %s)", name, part->label, part->uuid);
	r = 0;
	goto out;

rollback:
	quota_release(m, v);
	(void)rollback_create(m, v, made_dir);
	log_warning("volume %s: create failed and was rolled back: %s", name,
		    reterr_msg && *reterr_msg ? *reterr_msg : strerror(-r));
out:
	pthread_mutex_unlock(&m->create_lock);
	return r;
}

/* ---- remove ---- */

typedef struct TrashJob {
	Manager *m;
	Partition *part;
	char name[VOLUME_NAME_MAX + 48];
	uint32_t projid;
} TrashJob;

static void *trash_worker(void *arg)
{
	TrashJob *job = arg;
	int r = rm_rf_at(job->part->trash_fd, job->name);

	if (r < 0)
		log_warning("trash %s on partition %s: delete failed, will retry at next start: %s", job->name,
			    job->part->label, strerror(-r));
	else
		quota_release_id(job->m, job->part, job->projid);
	(void)fsync(job->part->trash_fd);
	free(job);
	return NULL;
}

static void delete_trash_async(Manager *m, Partition *part, const char *trash_name, uint32_t projid)
{
	TrashJob *job = calloc(1, sizeof(*job));
	pthread_attr_t attr;
	pthread_t t;

	if (!job)
		return;
	job->m = m;
	job->part = part;
	job->projid = projid;
	snprintf(job->name, sizeof(job->name), "%s", trash_name);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, trash_worker, job) != 0)
		trash_worker(job);
	pthread_attr_destroy(&attr);
}

int manager_remove(Manager *m, const char *name, char **reterr_msg)
{
	_cleanup_(volume_unrefp) Volume *v = NULL;
	char trash_name[VOLUME_NAME_MAX + 48];
	uint64_t rnd = 0;
	int r;

	if (!volume_name_is_valid(name))
		return errmsg_set(reterr_msg, -EINVAL, "invalid volume name");

	pthread_mutex_lock(&m->create_lock);
	v = lookup(m, name);
	if (!v) {
		pthread_mutex_unlock(&m->create_lock);
		log_info("volume %s: remove of an unknown volume, nothing to do", name);
		return 0;
	}
	pthread_mutex_lock(&v->op_lock);
	if (v->removed) {
		r = 0;
		goto out;
	}
	if (volume_mount_total(v) > 0) {
		r = errmsg_set(reterr_msg, -EBUSY,
			    "volume %s is in use (mounted %u time(s)); stop the containers that use it first", name,
			    volume_mount_total(v));
		goto out;
	}
	if (!v->part || !v->part->present) {
		r = errmsg_set(reterr_msg, -ENODEV,
			    "volume %s is on partition %s (UUID %s), which is not available; reattach it to remove "
			    "the volume's data, or delete %s/index/%s.json to forget the volume",
			    name, v->partition_label, v->partition_uuid, m->cfg->state_dir, name);
		goto out;
	}
	if (!v->corrupt) {
		pthread_rwlock_wrlock(&m->reg_lock);
		v->state = VOLUME_REMOVING;
		pthread_rwlock_unlock(&m->reg_lock);
		r = save_record(m, v);
		if (r < 0) {
			pthread_rwlock_wrlock(&m->reg_lock);
			v->state = VOLUME_READY;
			pthread_rwlock_unlock(&m->reg_lock);
			r = errmsg_set(reterr_msg, r, "cannot write the volume record on partition %s: %s",
				    v->part->label, strerror(-r));
			goto out;
		}
	}

	/* Moving the directory to the trash is atomic; deleting its contents can take long. */
	(void)getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK);
	snprintf(trash_name, sizeof(trash_name), "%s.%016llx", name, (unsigned long long)rnd);
	if (renameat(v->part->volumes_fd, name, v->part->trash_fd, trash_name) < 0 && errno != ENOENT) {
		r = errmsg_set(reterr_msg, negative_errno(), "cannot remove the volume directory on partition %s: %s",
			    v->part->label, strerror(errno));
		goto out;
	}
	if (fsync(v->part->trash_fd) < 0 || fsync(v->part->volumes_fd) < 0) {
		r = errmsg_set(reterr_msg, negative_errno(), "cannot sync partition %s: %s", v->part->label,
			    strerror(errno));
		goto out;
	}
	r = delete_record(v->part, name);
	if (r == 0)
		r = delete_index(m, name);
	if (r < 0) {
		errmsg_set(reterr_msg, r, "cannot delete the volume record: %s", strerror(-r));
		goto out;
	}
	(void)unlinkat(m->prop_fd, name, AT_REMOVEDIR);

	pthread_rwlock_wrlock(&m->reg_lock);
	v->removed = true;
	reg_remove_locked(m, v);
	pthread_rwlock_unlock(&m->reg_lock);

	delete_trash_async(m, v->part, trash_name, v->projid);
	log_info("volume %s: removed from partition %s", name, v->part->label);
	r = 0;
out:
	pthread_mutex_unlock(&v->op_lock);
	pthread_mutex_unlock(&m->create_lock);
	return r;
}

/* ---- mount and unmount ---- */

void mountpoint_of(Manager *m, const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", m->cfg->propagated_mount, name);
}

bool bind_entry_matches(const MountEntry *e, const Volume *v)
{
	char root[VOLUME_NAME_MAX + 32];

	snprintf(root, sizeof(root), "/nvmevol/volumes/%s", v->name);
	return v->part && v->part->present && e->dev == v->part->dev && streq(e->root, root) &&
	       mount_options_contain(e->vfs_options, "noatime") && mount_options_contain(e->vfs_options, "nodiratime");
}

/* Checks that the kernel shows our bind of @v at its mountpoint, with the flags we set. */
int verify_bind(Manager *m, Volume *v, char **ret_options, char **reterr_why)
{
	char target[PATH_MAX];
	MountEntry e = { 0 };
	int r;

	mountpoint_of(m, v->name, target, sizeof(target));
	r = mountinfo_find_target(target, &e);
	if (r < 0) {
		if (reterr_why)
			*reterr_why = strdup(r == -ENOENT ? "not mounted" : strerror(-r));
		return r;
	}
	if (!bind_entry_matches(&e, v))
		r = -ENXIO;
	if (r < 0) {
		if (reterr_why && asprintf(reterr_why, "kernel shows %s mounted from %u:%u%s with '%s'", target,
					   major(e.dev), minor(e.dev), e.root, e.vfs_options) < 0)
			*reterr_why = NULL;
	} else if (ret_options) {
		*ret_options = TAKE_PTR(e.vfs_options);
	}
	mount_entry_done(&e);
	return r;
}

static int bind_volume(Manager *m, Volume *v, char **reterr_msg)
{
	_cleanup_close_ int src = -EBADF, target = -EBADF;
	_cleanup_free_ char *why = NULL, *opts = NULL;
	char path[PATH_MAX];
	struct stat st, pst;
	int r;

	mountpoint_of(m, v->name, path, sizeof(path));
	r = mkdirat_exist_ok(m->prop_fd, v->name, 0755);
	if (r == -ENOTDIR) {
		/* Something else (a symlink?) sits where our mountpoint goes: PropagatedMount is ours. */
		(void)unlinkat(m->prop_fd, v->name, 0);
		r = mkdirat_exist_ok(m->prop_fd, v->name, 0755);
	}
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot create mountpoint %s: %s", path, strerror(-r));
	target = openat(m->prop_fd, v->name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (target < 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot open mountpoint %s: %s", path, strerror(errno));
	if (fstat(target, &st) < 0 || fstat(m->prop_fd, &pst) < 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot stat %s", path);
	if (st.st_dev != pst.st_dev) {
		/* A stale mount from before a crash sits there: take it away and retry once. */
		(void)close(TAKE_FD(target));
		(void)unmount_path(path);
		target = openat(m->prop_fd, v->name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (target < 0 || fstat(target, &st) < 0 || st.st_dev != pst.st_dev)
			return errmsg_set(reterr_msg, -EBUSY, "mountpoint %s is occupied by another mount", path);
	}

	src = openat(v->part->volumes_fd, v->name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (src < 0)
		return errmsg_set(reterr_msg, negative_errno(),
			       "the directory of volume %s is missing or not a directory on partition %s: %s", v->name,
			       v->part->label, strerror(errno));
	if (fstat(src, &st) < 0 || st.st_dev != v->part->dev)
		return errmsg_set(reterr_msg, -EXDEV, "the directory of volume %s is not on partition %s", v->name,
			       v->part->label);

	r = mount_bind_noatime(src, target);
	if (r < 0) {
		(void)unlinkat(m->prop_fd, v->name, AT_REMOVEDIR);
		return errmsg_set(reterr_msg, r, "bind mount of volume %s failed: %s", v->name, strerror(-r));
	}
	r = verify_bind(m, v, &opts, &why);
	if (r < 0) {
		(void)unmount_path(path);
		(void)unlinkat(m->prop_fd, v->name, AT_REMOVEDIR);
		return errmsg_set(reterr_msg, r, "volume %s was not mounted as asked (%s); refusing to serve it", v->name,
			       why ? why : strerror(-r));
	}
	pthread_rwlock_wrlock(&m->reg_lock);
	free(v->bind_options);
	v->bind_options = TAKE_PTR(opts);
	v->mounted = true;
	pthread_rwlock_unlock(&m->reg_lock);
	return 0;
}

static int unbind_volume(Manager *m, Volume *v)
{
	char path[PATH_MAX];
	MountEntry e = { 0 };
	int r = 0;

	mountpoint_of(m, v->name, path, sizeof(path));
	while (mountinfo_find_target(path, &e) == 0) {
		mount_entry_done(&e);
		r = unmount_path(path);
		if (r < 0)
			return r;
	}
	(void)unlinkat(m->prop_fd, v->name, AT_REMOVEDIR);
	pthread_rwlock_wrlock(&m->reg_lock);
	v->mounted = false;
	free(v->bind_options);
	v->bind_options = NULL;
	pthread_rwlock_unlock(&m->reg_lock);
	return 0;
}

/* Makes sure @v's partition is there and sound; rescans once if it is missing. */
static int ensure_partition(Manager *m, Volume *v, char **reterr_msg)
{
	if (!v->part || !v->part->present) {
		(void)pool_rescan_if_stale(m->pool, RESCAN_INTERVAL_MS);
		Partition *part = pool_find_uuid(m->pool, v->partition_uuid);
		if (part && part->present) {
			pthread_rwlock_wrlock(&m->reg_lock);
			v->part = part;
			pthread_rwlock_unlock(&m->reg_lock);
		}
	}
	if (!v->part || !v->part->present || !partition_verify(m->pool, v->part))
		return errmsg_set(reterr_msg, -ENODEV, "volume %s: partition %s (UUID %s) is not available: %s", v->name,
			       v->partition_label, v->partition_uuid,
			       v->part && v->part->problem ? v->part->problem : "not detected; is the disk attached?");
	return 0;
}

int manager_mount(Manager *m, const char *name, const char *id, char **ret_mountpoint, char **reterr_msg)
{
	_cleanup_(volume_unrefp) Volume *v = NULL;
	char path[PATH_MAX];
	bool fresh = false;
	int r;

	if (!volume_name_is_valid(name))
		return errmsg_set(reterr_msg, -EINVAL, "invalid volume name");
	if (!mount_id_is_valid(id))
		return errmsg_set(reterr_msg, -EINVAL, "invalid mount ID");
	v = lookup(m, name);
	if (!v)
		return errmsg_set(reterr_msg, -ENOENT, "no such volume: %s", name);

	pthread_mutex_lock(&v->op_lock);
	if (v->removed) {
		r = errmsg_set(reterr_msg, -ENOENT, "no such volume: %s", name);
		goto out;
	}
	if (v->corrupt) {
		r = errmsg_set(reterr_msg, -EUCLEAN, "volume %s cannot be mounted: its record is unreadable (%s)", name,
			    v->corrupt);
		goto out;
	}
	r = ensure_partition(m, v, reterr_msg);
	if (r < 0)
		goto out;

	if (v->mounted) {
		_cleanup_free_ char *why = NULL;
		if (verify_bind(m, v, NULL, &why) < 0) {
			log_warning("volume %s: mount vanished or changed (%s); mounting again", name,
				    why ? why : "?");
			(void)unbind_volume(m, v);
		}
	}
	if (!v->mounted) {
		r = selftest_before_mount(m, v, reterr_msg);
		if (r < 0)
			goto out;
		r = bind_volume(m, v, reterr_msg);
		if (r < 0)
			goto out;
		fresh = true;
	}

	pthread_rwlock_wrlock(&m->reg_lock);
	r = volume_mount_add(v, id);
	pthread_rwlock_unlock(&m->reg_lock);
	if (r == 0)
		r = save_mounts(m, v);
	if (r < 0) {
		pthread_rwlock_wrlock(&m->reg_lock);
		(void)volume_mount_drop(v, id);
		pthread_rwlock_unlock(&m->reg_lock);
		if (fresh)
			(void)unbind_volume(m, v);
		r = errmsg_set(reterr_msg, r, "volume %s: cannot record the mount in %s/mounts: %s", name,
			       m->cfg->state_dir, strerror(-r));
		goto out;
	}
	mountpoint_of(m, name, path, sizeof(path));
	*ret_mountpoint = strdup(path);
	if (!*ret_mountpoint) {
		r = -ENOMEM;
		goto out;
	}
	log_info("volume %s: mounted for %.12s (%u user(s)) at %s", name, id, volume_mount_total(v), path);
	r = 0;
out:
	pthread_mutex_unlock(&v->op_lock);
	return r;
}

int manager_unmount(Manager *m, const char *name, const char *id, char **reterr_msg)
{
	_cleanup_(volume_unrefp) Volume *v = NULL;
	bool counted = false;
	int r = 0;

	if (!volume_name_is_valid(name))
		return errmsg_set(reterr_msg, -EINVAL, "invalid volume name");
	if (!mount_id_is_valid(id))
		return errmsg_set(reterr_msg, -EINVAL, "invalid mount ID");
	v = lookup(m, name);
	if (!v) {
		log_info("volume %s: unmount of an unknown volume, nothing to do", name);
		return 0;
	}
	pthread_mutex_lock(&v->op_lock);
	pthread_rwlock_rdlock(&m->reg_lock);
	for (size_t i = 0; i < v->n_mounts; i++)
		if (streq(v->mounts[i].id, id))
			counted = true;
	pthread_rwlock_unlock(&m->reg_lock);
	if (v->removed || !counted) {
		log_info("volume %s: unmount for unknown ID %.12s, nothing to do", name, id);
		goto out;
	}
	if (volume_mount_total(v) == 1 && v->mounted) {
		r = unbind_volume(m, v);
		if (r < 0) {
			r = errmsg_set(reterr_msg, r, "volume %s: unmount failed: %s", name, strerror(-r));
			goto out;
		}
	}
	pthread_rwlock_wrlock(&m->reg_lock);
	(void)volume_mount_drop(v, id);
	pthread_rwlock_unlock(&m->reg_lock);
	r = save_mounts(m, v);
	if (r < 0)
		/* The on-disk count stays higher: the fail-safe direction (an extra "in use"). */
		log_warning_errno(r, "volume %s: cannot record the unmount; the stored count stays higher", name);
	log_info("volume %s: unmounted for %.12s (%u user(s) left)", name, id, volume_mount_total(v));
	r = 0;
out:
	pthread_mutex_unlock(&v->op_lock);
	return r;
}

int manager_path(Manager *m, const char *name, char **ret_mountpoint, char **reterr_msg)
{
	_cleanup_(volume_unrefp) Volume *v = NULL;
	char path[PATH_MAX];
	bool mounted;

	if (!volume_name_is_valid(name))
		return errmsg_set(reterr_msg, -EINVAL, "invalid volume name");
	v = lookup(m, name);
	if (!v)
		return errmsg_set(reterr_msg, -ENOENT, "no such volume: %s", name);
	pthread_rwlock_rdlock(&m->reg_lock);
	mounted = v->mounted && !v->removed;
	pthread_rwlock_unlock(&m->reg_lock);
	*ret_mountpoint = NULL;
	if (mounted) {
		mountpoint_of(m, name, path, sizeof(path));
		*ret_mountpoint = strdup(path);
		if (!*ret_mountpoint)
			return -ENOMEM;
	}
	return 0;
}

int manager_get(Manager *m, const char *name, json_t **ret_volume, char **reterr_msg)
{
	_cleanup_(volume_unrefp) Volume *v = NULL;
	json_t *j;

	if (!volume_name_is_valid(name))
		return errmsg_set(reterr_msg, -EINVAL, "invalid volume name");
	v = lookup(m, name);
	if (!v)
		return errmsg_set(reterr_msg, -ENOENT, "no such volume: %s", name);
	/* Status must not say "ready" for a partition that vanished underneath: re-check (one mountinfo read). */
	if (v->part && v->part->present)
		(void)partition_verify(m->pool, v->part);
	j = volume_to_api_json(m, v, true);
	if (!j)
		return errmsg_set(reterr_msg, -ENOMEM, "out of memory");
	*ret_volume = j;
	return 0;
}

int manager_list(Manager *m, ManagerListCallback cb, void *userdata)
{
	char path[PATH_MAX];

	pthread_rwlock_rdlock(&m->reg_lock);
	for (size_t i = 0; i < m->n_vols; i++) {
		if (m->vols[i]->mounted)
			mountpoint_of(m, m->vols[i]->name, path, sizeof(path));
		cb(m->vols[i]->name, m->vols[i]->mounted ? path : NULL, userdata);
	}
	pthread_rwlock_unlock(&m->reg_lock);
	return 0;
}
