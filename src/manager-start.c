/* SPDX-License-Identifier: MIT */
/*
 * Start-up: lock the state directory, find the partitions, load every
 * volume record, finish or roll back what a crash interrupted, and make the
 * kernel's mounts agree with the recorded mount counts. Nothing is served
 * before this is done.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#include "manager-internal.h"
#include "mount.h"
#include "util/fs-util.h"
#include "util/log.h"
#include "util/macro.h"

typedef int (*RecordCallback)(Manager *m, Partition *part, const char *filename, Volume *v, const char *err);
/* Returns false to skip reading a file (start-up reads only what it needs: 10,000 volumes start fast). */
typedef bool (*RecordFilter)(Manager *m, const char *filename);

typedef struct LoadedRecord {
	char *filename;
	Volume *volume; /* NULL if unreadable */
	char *err;
} LoadedRecord;

typedef struct LoadJob {
	int dirfd;
	LoadedRecord *recs;
	size_t n, next; /* next: claimed with an atomic add */
} LoadJob;

/* Reads and parses records; independent of each other, so several threads share the work. */
static void *load_worker(void *arg)
{
	LoadJob *job = arg;

	for (;;) {
		size_t i = __atomic_fetch_add(&job->next, 1, __ATOMIC_RELAXED);
		_cleanup_free_ char *buf = NULL;
		size_t len = 0;
		int r;

		if (i >= job->n)
			return NULL;
		r = read_file_at(job->dirfd, job->recs[i].filename, RECORD_SIZE_MAX, &buf, &len);
		if (r < 0) {
			if (asprintf(&job->recs[i].err, "cannot read: %s", strerror(-r)) < 0)
				job->recs[i].err = NULL;
		} else
			(void)volume_record_parse(buf, len, &job->recs[i].volume, &job->recs[i].err);
	}
}

#define LOAD_THREADS 4
#define LOAD_PARALLEL_MIN 256

/*
 * Calls @cb for every *.json record in @dirfd that @want (if set) accepts, in
 * directory order; unreadable ones get v == NULL and a reason. Parsing, the bulk
 * of start-up with thousands of volumes, runs on up to LOAD_THREADS threads.
 */
static int for_each_record(Manager *m, Partition *part, int dirfd, RecordFilter want, RecordCallback cb)
{
	LoadJob job = { .dirfd = dirfd };
	pthread_t threads[LOAD_THREADS];
	size_t cap = 0, n_threads = 0;
	struct dirent *de;
	DIR *d;
	int r = 0;

	d = opendir_fd(dirfd);
	if (!d)
		return negative_errno();
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name);

		if (de->d_name[0] == '.' || n < 6 || !streq(de->d_name + n - 5, ".json"))
			continue;
		if (want && !want(m, de->d_name))
			continue;
		if (job.n == cap) {
			LoadedRecord *nr;
			cap = cap ? cap * 2 : 64;
			nr = realloc(job.recs, cap * sizeof(*nr));
			if (!nr) {
				r = -ENOMEM;
				break;
			}
			job.recs = nr;
		}
		job.recs[job.n] = (LoadedRecord){ .filename = strdup(de->d_name) };
		if (!job.recs[job.n].filename) {
			r = -ENOMEM;
			break;
		}
		job.n++;
	}
	closedir(d);

	if (r == 0 && job.n >= LOAD_PARALLEL_MIN)
		while (n_threads < LOAD_THREADS && pthread_create(&threads[n_threads], NULL, load_worker, &job) == 0)
			n_threads++;
	if (r == 0)
		load_worker(&job);
	for (size_t t = 0; t < n_threads; t++)
		pthread_join(threads[t], NULL);

	for (size_t i = 0; i < job.n; i++) {
		if (r == 0)
			r = cb(m, part, job.recs[i].filename, job.recs[i].volume,
			       job.recs[i].err ? job.recs[i].err : "unknown error");
		volume_unref(job.recs[i].volume);
		free(job.recs[i].err);
		free(job.recs[i].filename);
	}
	free(job.recs);
	return r;
}

/* "<name>.json" → name, if the name is valid. */
static bool name_from_filename(const char *fn, char *buf, size_t len)
{
	size_t n = strlen(fn);

	if (n < 6 || n - 5 >= len)
		return false;
	memcpy(buf, fn, n - 5);
	buf[n - 5] = '\0';
	return volume_name_is_valid(buf);
}

static int register_volume(Manager *m, Volume *v)
{
	int r = 0;

	pthread_rwlock_wrlock(&m->reg_lock);
	if (m->bulk_loading) {
		if (m->n_vols == m->cap) {
			size_t cap = m->cap ? m->cap * 2 : 64;
			Volume **nv = realloc(m->vols, cap * sizeof(*nv));
			if (!nv)
				r = -ENOMEM;
			else {
				m->vols = nv;
				m->cap = cap;
			}
		}
		if (r == 0)
			m->vols[m->n_vols++] = volume_ref(v);
	} else
		r = reg_insert_locked(m, v);
	pthread_rwlock_unlock(&m->reg_lock);
	return r;
}

static int compare_volumes(const void *a, const void *b)
{
	const Volume *x = *(Volume *const *)a, *y = *(Volume *const *)b;
	int c = strcmp(x->name, y->name);

	if (c != 0)
		return c;
	/* The same name on two partitions: a deterministic pick (by UUID), the other is dropped. */
	return strcmp(x->partition_uuid, y->partition_uuid);
}

/* Ends bulk loading: sorts the registry and drops duplicate names, keeping the first. */
static void finish_bulk_load(Manager *m)
{
	size_t out = 0;

	if (m->n_vols > 1)
		qsort(m->vols, m->n_vols, sizeof(*m->vols), compare_volumes);
	for (size_t i = 0; i < m->n_vols; i++) {
		if (out > 0 && streq(m->vols[out - 1]->name, m->vols[i]->name)) {
			log_error("volume %s exists on partitions %s and %s; serving the first, ignoring the second",
				  m->vols[i]->name, m->vols[out - 1]->partition_label, m->vols[i]->partition_label);
			volume_unref(m->vols[i]);
			continue;
		}
		m->vols[out++] = m->vols[i];
	}
	m->n_vols = out;
	m->bulk_loading = false;
}

static void quarantine_dir(Partition *part, const char *name, const char *why)
{
	char qname[NAME_MAX + 32];
	int r;

	/* Empty leftovers are simply removed; anything with data is kept for the admin. */
	if (unlinkat(part->volumes_fd, name, AT_REMOVEDIR) == 0) {
		(void)fsync(part->volumes_fd);
		return;
	}
	snprintf(qname, sizeof(qname), "%s.%lld", name, (long long)time(NULL));
	r = renameat(part->volumes_fd, name, part->quarantine_fd, qname);
	if (r == 0) {
		(void)fsync(part->quarantine_fd);
		(void)fsync(part->volumes_fd);
		log_warning("partition %s: directory volumes/%s (%s) moved to nvmevol/quarantine/%s", part->label,
			    name, why, qname);
	}
}

static int load_record(Manager *m, Partition *part, const char *filename, Volume *v, const char *err)
{
	char name[VOLUME_NAME_MAX + 2];

	if (!name_from_filename(filename, name, sizeof(name))) {
		log_warning("partition %s: ignoring meta/%s (not a volume record name)", part->label, filename);
		return 0;
	}
	if (!v) {
		/* One bad record never stops the others; the volume is reported, not guessed at. */
		Volume *bad = volume_new(name);
		if (!bad)
			return -ENOMEM;
		bad->corrupt = strdup(err);
		bad->part = part;
		bad->state = VOLUME_READY;
		snprintf(bad->partition_uuid, sizeof(bad->partition_uuid), "%s", part->uuid);
		snprintf(bad->partition_label, sizeof(bad->partition_label), "%s", part->label);
		log_error("volume %s: record on partition %s is unreadable (%s); it is listed but will not be mounted",
			  name, part->label, err);
		(void)register_volume(m, bad);
		volume_unref(bad);
		return 0;
	}
	if (!streq(v->name, name)) {
		log_warning("partition %s: meta/%s holds volume '%s'; ignored", part->label, filename, v->name);
		return 0;
	}
	v->part = part;
	/* Mount counts belong to this host's Docker, and come from <state>/mounts only. */
	volume_mounts_clear(v);
	if (!streq(v->partition_uuid, part->uuid)) {
		/* The record travelled with its disk (or the disk was cloned): where it is wins. */
		snprintf(v->partition_uuid, sizeof(v->partition_uuid), "%s", part->uuid);
	}
	snprintf(v->partition_label, sizeof(v->partition_label), "%s", part->label);

	switch (v->state) {
	case VOLUME_CREATING:
		/* Never acknowledged: roll back. */
		log_info("volume %s: create was interrupted; rolling back", name);
		(void)rm_rf_at(part->volumes_fd, name);
		(void)fsync(part->volumes_fd);
		(void)unlink_durable_at(m->index_fd, filename);
		return unlink_durable_at(part->meta_fd, filename);
	case VOLUME_REMOVING: {
		/* Acknowledgement may have been sent: finish it. */
		char trash[VOLUME_NAME_MAX + 32];
		log_info("volume %s: remove was interrupted; finishing it", name);
		snprintf(trash, sizeof(trash), "%s.%lld", name, (long long)time(NULL));
		if (renameat(part->volumes_fd, name, part->trash_fd, trash) == 0) {
			(void)fsync(part->trash_fd);
			(void)fsync(part->volumes_fd);
		}
		(void)unlink_durable_at(m->index_fd, filename);
		return unlink_durable_at(part->meta_fd, filename);
	}
	default:
		break;
	}
	return register_volume(m, v);
}

static void load_partition(Manager *m, Partition *part)
{
	int r = for_each_record(m, part, part->meta_fd, NULL, load_record);

	if (r < 0)
		log_error_errno(r, "partition %s: cannot read volume records", part->label);
}

/* After every record is loaded: leftovers without a record, the trash, self-test scratch. */
static void clean_partition(Manager *m, Partition *part)
{
	DIR *d;
	struct dirent *de;

	/* Directories without a record: leftovers of a create that never wrote one. */
	d = opendir_fd(part->volumes_fd);
	if (!d)
		return;
	while ((de = readdir(d))) {
		_cleanup_(volume_unrefp) Volume *v = NULL;

		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		v = volume_name_is_valid(de->d_name) ? lookup(m, de->d_name) : NULL;
		if (!v || v->part != part)
			quarantine_dir(part, de->d_name, "no volume record");
	}
	closedir(d);
	(void)rm_rf_children(part->trash_fd);
	(void)fsync(part->trash_fd);
	selftest_clean_partition(part);
}

static int load_mounts_file(Manager *m, Partition *unused, const char *filename, Volume *counts, const char *err)
{
	char name[VOLUME_NAME_MAX + 2];
	Volume *v;

	if (!name_from_filename(filename, name, sizeof(name)))
		return 0;
	v = reg_find_locked(m, name);
	if (!v || !counts) {
		/* Counts of a volume that no longer exists, or unreadable: nothing can rely on them. */
		log_warning("mount counts %s dropped (%s)", filename, v ? err : "no such volume");
		return unlink_durable_at(m->mounts_fd, filename);
	}
	volume_mounts_clear(v);
	v->mounts = TAKE_PTR(counts->mounts);
	v->n_mounts = counts->n_mounts;
	counts->n_mounts = 0;
	return 0;
}

/* An index entry only matters for a volume no present partition has a record of. */
static bool index_entry_needed(Manager *m, const char *filename)
{
	char name[VOLUME_NAME_MAX + 2];
	Volume *v;

	if (!name_from_filename(filename, name, sizeof(name)))
		return false;
	v = reg_find_locked(m, name);
	if (v)
		v->indexed = true;
	return !v;
}

static int load_index_entry(Manager *m, Partition *unused, const char *filename, Volume *v, const char *err)
{
	char name[VOLUME_NAME_MAX + 2];
	_cleanup_(volume_unrefp) Volume *known = NULL;
	Partition *part;

	if (!name_from_filename(filename, name, sizeof(name)))
		return 0;
	known = lookup(m, name);
	if (known)
		return 0;
	if (!v) {
		log_error("volume %s: index entry unreadable (%s)", name, err);
		return 0;
	}
	part = pool_find_uuid(m->pool, v->partition_uuid);
	if (part && part->present) {
		/* The partition is here and has no record: the volume was removed (or never committed). */
		log_info("volume %s: dropping stale index entry (no record on partition %s)", name, part->label);
		return unlink_durable_at(m->index_fd, filename);
	}
	/* Its partition is missing: keep serving Get so Docker does not forget the volume. */
	volume_mounts_clear(v);
	v->part = NULL;
	log_warning("volume %s: partition %s (UUID %s) is missing; the volume is listed but cannot be mounted",
		    name, v->partition_label, v->partition_uuid);
	return register_volume(m, v);
}

/*
 * Mount reconciliation, from one read of mountinfo: counts > 0 need the bind;
 * a bind with no counts, and any mount no volume owns, goes.
 */
static void reconcile_mounts(Manager *m)
{
	MountEntry *mounts = NULL;
	size_t n = 0, plen = strlen(m->cfg->propagated_mount);
	struct dirent *de;
	DIR *d;

	if (mountinfo_list_below(m->cfg->propagated_mount, &mounts, &n) < 0) {
		log_error("cannot read mountinfo; mount counts left as recorded");
		return;
	}
	/* Deepest first, so that nested strays come off before their parents. */
	for (size_t k = n; k-- > 0;) {
		const char *rest = mounts[k].target + plen + 1;
		Volume *v = NULL;

		if (!strchr(rest, '/') && volume_name_is_valid(rest))
			v = reg_find_locked(m, rest);
		if (v && !v->corrupt && !v->mounted && volume_mount_total(v) > 0 && bind_entry_matches(&mounts[k], v)) {
			v->mounted = true;
			free(v->bind_options);
			v->bind_options = strdup(mounts[k].vfs_options);
			log_info("volume %s: still mounted with %u user(s); keeping the counts", v->name,
				 volume_mount_total(v));
			continue;
		}
		if (v && !v->part && volume_mount_total(v) > 0)
			continue; /* partition missing: leave a container's data where it is */
		log_warning("%s %s (from %s%s): unmounting", v ? "unowned or wrong mount of volume" : "stray mount",
			    mounts[k].target, mounts[k].source, mounts[k].root);
		(void)unmount_path(mounts[k].target);
	}
	mount_entries_free(mounts, n);

	for (size_t i = 0; i < m->n_vols; i++) {
		Volume *v = m->vols[i];

		if (v->corrupt || v->mounted || volume_mount_total(v) == 0 || !v->part || !v->part->present)
			continue;
		/* The bind went away (plugin disabled, daemon stopped, reboot): nobody can be using it. */
		log_info("volume %s: %u recorded mount(s) but the bind is gone; counts reset", v->name,
			 volume_mount_total(v));
		volume_mounts_clear(v);
		(void)save_mounts(m, v);
	}

	/* Empty mountpoint directories of volumes that are not mounted. */
	d = opendir_fd(m->prop_fd);
	if (!d)
		return;
	while ((de = readdir(d))) {
		Volume *v;
		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		v = volume_name_is_valid(de->d_name) ? reg_find_locked(m, de->d_name) : NULL;
		if (!v || !v->mounted)
			(void)unlinkat(m->prop_fd, de->d_name, AT_REMOVEDIR);
	}
	closedir(d);
}

static int open_dir_p(const char *path, mode_t mode, int *ret)
{
	char buf[PATH_MAX];
	int r;

	/* mkdir -p: create each component, accept existing directories. */
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		r = mkdirat_exist_ok(AT_FDCWD, buf, 0755);
		*p = '/';
		if (r < 0)
			return r;
	}
	r = mkdirat_exist_ok(AT_FDCWD, buf, mode);
	if (r < 0)
		return r;
	*ret = open(buf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return *ret < 0 ? negative_errno() : 0;
}

int manager_start(Manager *m, char **reterr_msg)
{
	int r;

	r = open_dir_p(m->cfg->state_dir, 0700, &m->state_fd);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot open state directory %s: %s", m->cfg->state_dir, strerror(-r));
	m->lock_fd = openat(m->state_fd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (m->lock_fd < 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot open %s/lock: %s", m->cfg->state_dir,
			       strerror(errno));
	if (flock(m->lock_fd, LOCK_EX | LOCK_NB) < 0)
		return errmsg_set(reterr_msg, -EBUSY, "state locked: another nvmevol instance uses %s", m->cfg->state_dir);
	r = mkdirat_exist_ok(m->state_fd, "index", 0700);
	if (r >= 0) {
		m->index_fd = openat(m->state_fd, "index", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		r = m->index_fd < 0 ? negative_errno() : 0;
	}
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot open %s/index: %s", m->cfg->state_dir, strerror(-r));
	(void)remove_atomic_tmp_files(m->index_fd);
	r = mkdirat_exist_ok(m->state_fd, "mounts", 0700);
	if (r >= 0) {
		m->mounts_fd = openat(m->state_fd, "mounts", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		r = m->mounts_fd < 0 ? negative_errno() : 0;
	}
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot open %s/mounts: %s", m->cfg->state_dir, strerror(-r));
	(void)remove_atomic_tmp_files(m->mounts_fd);

	r = open_dir_p(m->cfg->propagated_mount, 0755, &m->prop_fd);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot open %s: %s", m->cfg->propagated_mount, strerror(-r));

	r = pool_scan(m->pool);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "partition discovery failed: %s", strerror(-r));

	m->bulk_loading = true;
	for (size_t i = 0; i < pool_size(m->pool); i++) {
		Partition *part = pool_get(m->pool, i);
		if (part->present)
			load_partition(m, part);
	}
	finish_bulk_load(m);
	for (size_t i = 0; i < pool_size(m->pool); i++) {
		Partition *part = pool_get(m->pool, i);
		if (part->present)
			clean_partition(m, part);
	}
	r = for_each_record(m, NULL, m->index_fd, index_entry_needed, load_index_entry);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot read the index: %s", strerror(-r));

	r = for_each_record(m, NULL, m->mounts_fd, NULL, load_mounts_file);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot read the mount counts: %s", strerror(-r));

	/* Records without an index entry (a disk moved here, or a crash between the two writes). */
	for (size_t i = 0; i < m->n_vols; i++) {
		Volume *v = m->vols[i];

		if (v->part && !v->corrupt && !v->indexed)
			(void)save_index(m, v);
		if (v->part && !v->corrupt)
			(void)quota_repair(m, v);
	}

	reconcile_mounts(m);
	log_info("ready: %zu volume(s) on %zu partition(s)", m->n_vols, pool_size(m->pool));
	return 0;
}
