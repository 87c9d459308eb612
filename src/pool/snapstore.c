/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pool/snapstore.h"
#include "util/alloc-util.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/macro.h"

#define RECORD_SUFFIX ".json"

void snapdir_done(SnapDir *d)
{
	int *fds[] = { &d->vol_fd, &d->meta_fd, &d->data_fd };

	for (size_t i = 0; i < ELEMENTSOF(fds); i++)
		if (*fds[i] >= 0) {
			(void)close(*fds[i]);
			*fds[i] = -EBADF;
		}
}

int snapstore_open(PartitionFs *fs, const char *volume, bool create, SnapDir *ret)
{
	SnapDir d = SNAPDIR_NULL;
	bool made = false;
	int r;

	*ret = SNAPDIR_NULL;
	if (fs->snapshots_fd < 0)
		return create ? -EROFS : -ENOENT;
	r = pool_open_subdir(fs->snapshots_fd, volume, 0700, fs->dev, create, &made);
	if (r < 0)
		return r;
	d.vol_fd = r;
	r = pool_open_subdir(d.vol_fd, "meta", 0700, fs->dev, create, &made);
	if (r >= 0) {
		d.meta_fd = r;
		r = pool_open_subdir(d.vol_fd, "data", 0700, fs->dev, create, &made);
	}
	if (r >= 0) {
		d.data_fd = r;
		/* The records' directory must outlive a crash before the first record does. */
		if (made && (fsync(d.vol_fd) < 0 || fsync(fs->snapshots_fd) < 0))
			r = negative_errno();
	}
	if (r < 0) {
		snapdir_done(&d);
		return r;
	}
	*ret = d;
	return 0;
}

int snapstore_volume_names(PartitionFs *fs, char ***ret_names, size_t *ret_n)
{
	uint64_t mem = 0;

	*ret_names = NULL;
	*ret_n = 0;
	if (fs->snapshots_fd < 0)
		return 0;
	/* Bounded as a listing of 1,000,000 volume names would be. */
	return dir_read_names(fs->snapshots_fd, true, &mem, UINT64_C(1000000) * (VOLUME_NAME_MAX + 1 + sizeof(char *)),
			      ret_names, ret_n);
}

static void record_name(const char *snap, char buf[static VOLUME_NAME_MAX + sizeof(RECORD_SUFFIX)])
{
	strcpy(buf, snap);
	strcat(buf, RECORD_SUFFIX);
}

int snapstore_save(SnapDir *d, const char *volume, const VolumeSnapshot *s)
{
	_cleanup_free_ char *buf = snapshot_record_dump(volume, s);
	char file[VOLUME_NAME_MAX + sizeof(RECORD_SUFFIX)];
	int r;

	if (!buf)
		return -ENOMEM;
	record_name(s->name, file);
	r = write_file_atomic_at(d->meta_fd, file, buf, strlen(buf), 0600);
	if (r < 0)
		r = write_file_atomic_at(d->meta_fd, file, buf, strlen(buf), 0600);
	return r;
}

int snapstore_delete(SnapDir *d, const char *name)
{
	char file[VOLUME_NAME_MAX + sizeof(RECORD_SUFFIX)];
	int r;

	record_name(name, file);
	r = unlink_durable_at(d->meta_fd, file);
	if (r < 0)
		r = unlink_durable_at(d->meta_fd, file);
	return r;
}

typedef struct Loader {
	SnapDir *d;
	const char *volume;
	SnapstoreDamagedFn damaged;
	void *userdata;
	VolumeSnapshot *v;
	size_t n, cap;
} Loader;

static int load_one(const char *file, void *userdata)
{
	Loader *l = userdata;
	_cleanup_free_ char *buf = NULL, *err = NULL;
	char name[VOLUME_NAME_MAX + 1];
	size_t len = 0, fl = strlen(file), sl = strlen(RECORD_SUFFIX);
	VolumeSnapshot s;
	struct stat st;
	int r;

	if (is_atomic_tmp_name(file)) {
		(void)unlinkat(l->d->meta_fd, file, 0); /* a write that never renamed: no record yet */
		return 0;
	}
	if (fl <= sl || fl - sl > VOLUME_NAME_MAX || !streq(file + fl - sl, RECORD_SUFFIX)) {
		if (l->damaged)
			l->damaged(file, "not a snapshot record's name", l->userdata);
		return 0;
	}
	memcpy(name, file, fl - sl);
	name[fl - sl] = '\0';
	r = read_file_at(l->d->meta_fd, file, SNAPSHOT_RECORD_SIZE_MAX, &buf, &len);
	if (r < 0 && r != -ENOENT)
		r = read_file_at(l->d->meta_fd, file, SNAPSHOT_RECORD_SIZE_MAX, &buf, &len);
	if (r == -ENOENT)
		return 0;
	if (r == 0)
		r = snapshot_record_parse(buf, len, l->volume, &s, &err);
	if (r == 0 && !streq(s.name, name))
		r = errmsg_set(&err, -EUCLEAN, "it holds snapshot '%s'", s.name);
	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		if (l->damaged)
			l->damaged(file, err ? err : errno_str(r), l->userdata);
		return 0;
	}
	s.data_missing = s.state == SNAPSHOT_COMMITTED &&
			 (fstatat(l->d->data_fd, s.name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode));
	if (GROW_ARRAY(l->v, l->cap, l->n + 1, 8) < 0)
		return -ENOMEM;
	l->v[l->n++] = s;
	return 0;
}

static int cmp_snap(const void *a, const void *b)
{
	return strcmp(((const VolumeSnapshot *)a)->name, ((const VolumeSnapshot *)b)->name);
}

int snapstore_load(SnapDir *d, const char *volume, SnapstoreDamagedFn damaged, void *userdata, VolumeSnapshot **ret,
		   size_t *ret_n)
{
	Loader l = { .d = d, .volume = volume, .damaged = damaged, .userdata = userdata };
	int r;

	r = dir_foreach_name(d->meta_fd, load_one, &l);
	if (r < 0) {
		free(l.v);
		return r;
	}
	if (l.n > 1)
		qsort(l.v, l.n, sizeof(*l.v), cmp_snap);
	*ret = l.v;
	*ret_n = l.n;
	return 0;
}

typedef struct OrphanWalk {
	const VolumeSnapshot *snaps;
	size_t n;
	int (*cb)(const char *name, void *userdata);
	void *userdata;
} OrphanWalk;

static int orphan_one(const char *name, void *userdata)
{
	OrphanWalk *w = userdata;

	for (size_t i = 0; i < w->n; i++)
		if (streq(w->snaps[i].name, name))
			return 0;
	return w->cb(name, w->userdata);
}

int snapstore_foreach_orphan(SnapDir *d, const VolumeSnapshot *snaps, size_t n,
			     int (*cb)(const char *name, void *userdata), void *userdata)
{
	OrphanWalk w = { .snaps = snaps, .n = n, .cb = cb, .userdata = userdata };

	return dir_foreach_name(d->data_fd, orphan_one, &w);
}

void snapstore_prune(PartitionFs *fs, const char *volume)
{
	_cleanup_close_ int fd = -EBADF;

	if (fs->snapshots_fd < 0)
		return;
	fd = openat(fs->snapshots_fd, volume, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	/* rmdir fails on anything that is not empty: a record, a snapshot, a rollback's leftover. */
	(void)unlinkat(fd, "meta", AT_REMOVEDIR);
	(void)unlinkat(fd, "data", AT_REMOVEDIR);
	if (unlinkat(fs->snapshots_fd, volume, AT_REMOVEDIR) == 0)
		(void)fsync(fs->snapshots_fd);
}
