/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "pool/store.h"
#include "util/alloc-util.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/log.h"
#include "util/macro.h"

struct Store {
	char *path;
	int state_fd;
	int index_fd;  /* <state>/index: one small file per volume, outlives any partition */
	int mounts_fd; /* <state>/mounts: per-ID mount counts of each mounted volume */
	int freeze_fd; /* <state>/freeze: a marker per partition nvmevol holds frozen (freeze.h) */
	int lock_fd;   /* <state>/lock, flock'ed: one instance per state directory */
};

#define FILENAME_MAX_LEN (VOLUME_NAME_MAX + 8)

static void filename_of(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s.json", name);
}

/* "<name>.json" → name, if the name is valid. */
static bool name_of(const char *fn, char *buf, size_t len)
{
	size_t n = strlen(fn);

	if (n < 6 || n - 5 >= len || !streq(fn + n - 5, ".json"))
		return false;
	memcpy(buf, fn, n - 5);
	buf[n - 5] = '\0';
	return volume_name_is_valid(buf);
}

static int open_subdir(int parent, const char *name, int *ret)
{
	int r = mkdirat_exist_ok(parent, name, 0700);

	if (r < 0)
		return r;
	*ret = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*ret < 0)
		return negative_errno();
	(void)remove_atomic_tmp_files(*ret);
	return 0;
}

Store *store_free(Store *s)
{
	if (!s)
		return NULL;
	free(s->path);
	if (s->state_fd >= 0)
		close(s->state_fd);
	if (s->index_fd >= 0)
		close(s->index_fd);
	if (s->mounts_fd >= 0)
		close(s->mounts_fd);
	if (s->freeze_fd >= 0)
		close(s->freeze_fd);
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	free(s);
	return NULL;
}

DEFINE_CLEANUP_FUNC(Store *, store_free)

int store_open(const char *state_dir, Store **ret, char **reterr_msg)
{
	_cleanup_(store_freep) Store *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	s->state_fd = s->index_fd = s->mounts_fd = s->freeze_fd = s->lock_fd = -EBADF;
	s->path = strdup(state_dir);
	if (!s->path)
		return -ENOMEM;
	r = mkdir_p_open(state_dir, 0700, &s->state_fd);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot open state directory %s: %s", state_dir, errno_str(r));
	s->lock_fd = openat(s->state_fd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (s->lock_fd < 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot open %s/lock: %s", state_dir, errno_str(errno));
	if (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0)
		return errmsg_set(reterr_msg, -EBUSY, "state locked: another nvmevol instance uses %s", state_dir);
	r = open_subdir(s->state_fd, "index", &s->index_fd);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot open %s/index: %s", state_dir, errno_str(r));
	r = open_subdir(s->state_fd, "mounts", &s->mounts_fd);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot open %s/mounts: %s", state_dir, errno_str(r));
	r = open_subdir(s->state_fd, "freeze", &s->freeze_fd);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot open %s/freeze: %s", state_dir, errno_str(r));
	*ret = TAKE_PTR(s);
	return 0;
}

const char *store_path(Store *s)
{
	return s->path;
}

int store_freeze_dir(Store *s)
{
	return s->freeze_fd;
}

/*
 * Every read, write and delete of a state file gets one more try: a passing
 * error (one EIO) must neither fail a request nor leave a stale index entry or
 * mount count, nor hide a volume at start. What a retry cannot change (no such
 * file, too big) is returned at once.
 */
static int read_at(int dirfd, const char *name, char **ret, size_t *ret_len)
{
	char fn[FILENAME_MAX_LEN];
	int r;

	filename_of(name, fn, sizeof(fn));
	r = read_file_at(dirfd, fn, RECORD_SIZE_MAX, ret, ret_len);
	if (r < 0 && r != -ENOENT && r != -EFBIG)
		r = read_file_at(dirfd, fn, RECORD_SIZE_MAX, ret, ret_len);
	return r;
}

static int write_at(int dirfd, const char *name, const char *buf, size_t len)
{
	char fn[FILENAME_MAX_LEN];
	int r;

	filename_of(name, fn, sizeof(fn));
	r = write_file_atomic_at(dirfd, fn, buf, len, 0600);
	if (r < 0)
		r = write_file_atomic_at(dirfd, fn, buf, len, 0600);
	return r;
}

static int save_text(int dirfd, const char *name, char *buf)
{
	_cleanup_free_ char *b = buf;

	if (!b)
		return -ENOMEM;
	return write_at(dirfd, name, b, strlen(b));
}

static int save(int dirfd, const char *name, const Volume *v, bool with_mounts)
{
	return save_text(dirfd, name, volume_record_dump(v, with_mounts));
}

static int delete(int dirfd, const char *name)
{
	char fn[FILENAME_MAX_LEN];
	int r;

	filename_of(name, fn, sizeof(fn));
	r = unlink_durable_at(dirfd, fn);
	if (r < 0)
		r = unlink_durable_at(dirfd, fn);
	return r;
}

static bool has(int dirfd, const char *name)
{
	char fn[FILENAME_MAX_LEN];
	struct stat st;

	filename_of(name, fn, sizeof(fn));
	return fstatat(dirfd, fn, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT;
}

int store_save_record(PartitionFs *fs, const Volume *v)
{
	if (!fs || fs->meta_fd < 0)
		return -ENODEV;
	if (fs->read_only)
		return -EROFS;
	return save(fs->meta_fd, v->name, v, false);
}

bool store_has_record(PartitionFs *fs, const char *name)
{
	/* An error other than "no such file" counts as "there may be one": never overwrite blindly. */
	return fs && fs->meta_fd >= 0 && has(fs->meta_fd, name);
}

int store_read_record(PartitionFs *fs, const char *name, char **ret, size_t *ret_len)
{
	if (!fs || fs->meta_fd < 0)
		return -ENODEV;
	return read_at(fs->meta_fd, name, ret, ret_len);
}

int store_restore_record(PartitionFs *fs, const char *name, const char *buf, size_t len)
{
	if (!fs || fs->meta_fd < 0)
		return -ENODEV;
	return write_at(fs->meta_fd, name, buf, len);
}

int store_delete_record(PartitionFs *fs, const char *name)
{
	if (!fs || fs->meta_fd < 0)
		return -ENODEV;
	return delete(fs->meta_fd, name);
}

int store_save_index(Store *s, const Volume *v, VolumeIndexState state)
{
	/* "This volume exists, on that partition, with the suid/dev this host granted" (and how far it got): no counts. */
	_cleanup_free_ char *buf = volume_index_dump(v, state);

	if (!buf)
		return -ENOMEM;
	return write_at(s->index_fd, v->name, buf, strlen(buf));
}

int store_read_index_bytes(Store *s, const char *name, char **ret, size_t *ret_len)
{
	return read_at(s->index_fd, name, ret, ret_len);
}

int store_restore_index(Store *s, const char *name, const char *buf, size_t len)
{
	return write_at(s->index_fd, name, buf, len);
}

int store_delete_index(Store *s, const char *name)
{
	return delete(s->index_fd, name);
}

bool store_has_index(Store *s, const char *name)
{
	return has(s->index_fd, name);
}

int store_read_index(Store *s, const char *name, Volume **ret)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	int r;

	r = read_at(s->index_fd, name, &buf, &len);
	if (r < 0)
		return r;
	return volume_record_parse(buf, len, ret, NULL);
}

/*
 * Mount counts are replaced (temp file, rename) and deleted without fsync.
 * They only matter while a bind survives: no bind survives a power loss or a
 * kernel crash, and start-up resets the counts of every volume whose bind is
 * gone (a torn or unreadable file counts as in use until then, so it is reset
 * too). A crash of the plugin process alone keeps the page cache, so a
 * restarted plugin reads the last counts written. Three fsyncs fewer per
 * Mount and Unmount (issue 23).
 */
static int save_counts(Store *s, const Volume *v)
{
	_cleanup_free_ char *b = volume_record_dump(v, true);
	char fn[FILENAME_MAX_LEN];
	int r;

	if (!b)
		return -ENOMEM;
	filename_of(v->name, fn, sizeof(fn));
	r = write_file_replace_at(s->mounts_fd, fn, b, strlen(b), 0600);
	if (r < 0)
		r = write_file_replace_at(s->mounts_fd, fn, b, strlen(b), 0600);
	return r;
}

static int delete_counts(Store *s, const char *name)
{
	char fn[FILENAME_MAX_LEN];

	filename_of(name, fn, sizeof(fn));
	for (int attempt = 0; attempt < 2; attempt++)
		if (unlinkat(s->mounts_fd, fn, 0) == 0 || errno == ENOENT)
			return 0;
	return negative_errno();
}

int store_save_mounts(Store *s, const Volume *v)
{
	/* Counts belong to this host's Docker: they live here, never on a (possibly full) partition. */
	if (volume_mount_total(v) == 0)
		return delete_counts(s, v->name);
	return save_counts(s, v);
}

int store_delete_mounts(Store *s, const char *name)
{
	return delete_counts(s, name);
}

/* ---- loading ---- */

typedef struct LoadedFile {
	char name[VOLUME_NAME_MAX + 1];
	Volume *volume; /* NULL if unreadable */
	char *err;
	bool skipped;   /* read, and not wanted once read (LoadJob.committed_unwanted) */
} LoadedFile;

typedef struct LoadJob {
	int dirfd;
	LoadedFile *files;
	size_t n, next; /* next: claimed with an atomic add */
	size_t cap;
	const char *what;
	StoreWantFn want;
	void *userdata;
	bool committed_unwanted; /* index entries: skip those without an "index_state" member */
} LoadJob;

/* Reads and parses files; independent of each other, so several threads share the work. */
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
		r = read_at(job->dirfd, job->files[i].name, &buf, &len);
		if (r < 0) {
			if (asprintf(&job->files[i].err, "cannot read: %s", errno_str(r)) < 0)
				job->files[i].err = NULL;
		} else if (job->committed_unwanted && !memmem(buf, len, "\"index_state\"", 13))
			/*
			 * Committed is written as no member (volume.c), and the key with its
			 * quotes cannot occur inside a JSON string (its quotes would be
			 * escaped): no parse needed to know this entry is committed.
			 */
			job->files[i].skipped = true;
		else
			(void)volume_record_parse(buf, len, &job->files[i].volume, &job->files[i].err);
	}
}

#define LOAD_THREADS 4
#define LOAD_PARALLEL_MIN 256

static int load_add(const char *fn, void *userdata)
{
	LoadJob *job = userdata;
	char name[VOLUME_NAME_MAX + 2];

	if (fn[0] == '.')
		return 0;
	if (!name_of(fn, name, sizeof(name))) {
		log_warning("%s: ignoring %s (not a volume file name)", job->what, fn);
		return 0;
	}
	if (job->want && !job->want(name, job->userdata))
		return 0;
	if (GROW_ARRAY(job->files, job->cap, job->n + 1, 64) < 0)
		return -ENOMEM;
	job->files[job->n] = (LoadedFile){ 0 };
	snprintf(job->files[job->n].name, sizeof(job->files[job->n].name), "%s", name);
	job->n++;
	return 0;
}

static int load_dir(int dirfd, const char *what, StoreWantFn want, bool committed_unwanted, StoreLoadFn cb,
		    void *userdata)
{
	LoadJob job = { .dirfd = dirfd, .what = what, .want = want, .userdata = userdata,
			.committed_unwanted = committed_unwanted };
	pthread_t threads[LOAD_THREADS];
	size_t n_threads = 0;
	int r;

	r = dir_foreach_name(dirfd, load_add, &job);
	if (r == 0 && job.n >= LOAD_PARALLEL_MIN)
		while (n_threads < LOAD_THREADS && pthread_create(&threads[n_threads], NULL, load_worker, &job) == 0)
			n_threads++;
	if (r == 0)
		load_worker(&job);
	for (size_t t = 0; t < n_threads; t++)
		pthread_join(threads[t], NULL);

	for (size_t i = 0; i < job.n; i++) {
		if (r == 0 && !job.files[i].skipped)
			r = cb(job.files[i].name, job.files[i].volume, job.files[i].err ? job.files[i].err : "unknown error",
			       userdata);
		volume_unref(job.files[i].volume);
		free(job.files[i].err);
	}
	free(job.files);
	return r;
}

int store_load_records(PartitionFs *fs, StoreWantFn want, StoreLoadFn cb, void *userdata)
{
	if (!fs || fs->meta_fd < 0)
		return 0; /* a read-only partition without nvmevol's tree has no records */
	return load_dir(fs->meta_fd, "volume records", want, false, cb, userdata);
}

int store_load_index(Store *s, StoreWantFn want, StoreLoadFn cb, void *userdata)
{
	return load_dir(s->index_fd, "index", want, false, cb, userdata);
}

int store_load_index_unsettled(Store *s, StoreWantFn want, StoreLoadFn cb, void *userdata)
{
	return load_dir(s->index_fd, "index", want, true, cb, userdata);
}

int store_load_mounts(Store *s, StoreLoadFn cb, void *userdata)
{
	return load_dir(s->mounts_fd, "mount counts", NULL, false, cb, userdata);
}
