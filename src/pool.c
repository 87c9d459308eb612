/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <stdarg.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <time.h>

#include "mount.h"
#include "pool.h"
#include "probe.h"
#include "quota.h"
#include "util/fs-util.h"
#include "util/log.h"
#include "util/macro.h"

#define XFS_SUPER_MAGIC 0x58465342
#define MAX_PARTITIONS 256

struct Pool {
	const Config *cfg;
	pthread_mutex_t lock; /* scans, and the partitions array */
	Partition **parts;
	size_t n;
	struct timespec last_scan;
	bool scanned;
};

int pool_new(const Config *cfg, Pool **ret)
{
	Pool *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->cfg = cfg;
	pthread_mutex_init(&p->lock, NULL);
	*ret = p;
	return 0;
}

static void close_fds(Partition *part)
{
	int *fds[] = { &part->root_fd, &part->tree_fd, &part->volumes_fd, &part->meta_fd,
		       &part->trash_fd, &part->scratch_fd, &part->quarantine_fd };

	for (size_t i = 0; i < ELEMENTSOF(fds); i++) {
		if (*fds[i] >= 0)
			(void)close(*fds[i]);
		*fds[i] = -EBADF;
	}
}

Pool *pool_free(Pool *p)
{
	if (!p)
		return NULL;
	for (size_t i = 0; i < p->n; i++) {
		close_fds(p->parts[i]);
		free(p->parts[i]->mountpoint);
		free(p->parts[i]->problem);
		free(p->parts[i]->selftest_cache);
		pthread_mutex_destroy(&p->parts[i]->selftest_lock);
		free(p->parts[i]);
	}
	free(p->parts);
	pthread_mutex_destroy(&p->lock);
	free(p);
	return NULL;
}

size_t pool_size(Pool *p)
{
	size_t n;

	pthread_mutex_lock(&p->lock);
	n = p->n;
	pthread_mutex_unlock(&p->lock);
	return n;
}

Partition *pool_get(Pool *p, size_t i)
{
	Partition *part = NULL;

	pthread_mutex_lock(&p->lock);
	if (i < p->n)
		part = p->parts[i];
	pthread_mutex_unlock(&p->lock);
	return part;
}

static void set_problem(Partition *part, const char *fmt, ...) _printf_(2, 3);
static void set_problem(Partition *part, const char *fmt, ...)
{
	va_list ap;

	free(part->problem);
	part->problem = NULL;
	va_start(ap, fmt);
	if (vasprintf(&part->problem, fmt, ap) < 0)
		part->problem = NULL;
	va_end(ap);
}

static Partition *find_uuid_locked(Pool *p, const char *uuid)
{
	for (size_t i = 0; i < p->n; i++)
		if (streq(p->parts[i]->uuid, uuid))
			return p->parts[i];
	return NULL;
}

Partition *pool_find_uuid(Pool *p, const char *uuid)
{
	Partition *part;

	pthread_mutex_lock(&p->lock);
	part = find_uuid_locked(p, uuid);
	pthread_mutex_unlock(&p->lock);
	return part;
}

static Partition *find_ref(Pool *p, const char *ref, bool present_only)
{
	Partition *found = NULL;

	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->n && !found; i++)
		if ((p->parts[i]->present || !present_only) &&
		    (streq(p->parts[i]->uuid, ref) || streq(p->parts[i]->label, ref)))
			found = p->parts[i];
	pthread_mutex_unlock(&p->lock);
	return found;
}

Partition *pool_find_ref(Pool *p, const char *ref)
{
	return find_ref(p, ref, true);
}

Partition *pool_find_ref_any(Pool *p, const char *ref)
{
	return find_ref(p, ref, false);
}

int partition_free_bytes(Partition *part, uint64_t *ret_free, uint64_t *ret_total)
{
	struct statvfs sv;

	if (part->root_fd < 0)
		return -ENODEV;
	if (fstatvfs(part->root_fd, &sv) < 0)
		return negative_errno();
	if (ret_free)
		*ret_free = (uint64_t)sv.f_bavail * sv.f_frsize;
	if (ret_total)
		*ret_total = (uint64_t)sv.f_blocks * sv.f_frsize;
	return 0;
}

Partition *pool_pick_most_free(Pool *p)
{
	Partition *best = NULL;
	uint64_t best_free = 0;

	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->n; i++) {
		uint64_t f;
		if (!p->parts[i]->present || partition_free_bytes(p->parts[i], &f, NULL) < 0)
			continue;
		if (!best || f > best_free) {
			best = p->parts[i];
			best_free = f;
		}
	}
	pthread_mutex_unlock(&p->lock);
	return best;
}

char *pool_describe(Pool *p)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	bool any = false;

	if (!f)
		return NULL;
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->n; i++) {
		if (!p->parts[i]->present)
			continue;
		fprintf(f, "%s%s (%s)", any ? ", " : "", p->parts[i]->label[0] ? p->parts[i]->label : "no label",
			p->parts[i]->uuid);
		any = true;
	}
	pthread_mutex_unlock(&p->lock);
	if (!any)
		fputs("none", f);
	if (fclose(f) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

/* Checks the kernel's view of the mount at part->mountpoint. */
static int check_mount(Partition *part, dev_t want_dev, MountEntry *ret_entry, char **ret_why)
{
	MountEntry e = { 0 };
	int r;

	r = mountinfo_find_target(part->mountpoint, &e);
	if (r == -ENOENT) {
		*ret_why = strdup("not mounted");
		return -ENOENT;
	}
	if (r < 0)
		return r;
	if (!streq(e.fstype, "xfs")) {
		r = asprintf(ret_why, "mounted as %s, not xfs", e.fstype);
		r = -EMEDIUMTYPE;
	} else if (want_dev && e.dev != want_dev) {
		r = asprintf(ret_why, "mount shows device %u:%u, expected %u:%u", major(e.dev), minor(e.dev),
			     major(want_dev), minor(want_dev));
		r = -ENXIO;
	} else if (!streq(e.root, "/")) {
		r = asprintf(ret_why, "mount root is %s, not the filesystem root", e.root);
		r = -EINVAL;
	} else if (!mount_options_contain(e.vfs_options, "noatime") ||
		   !mount_options_contain(e.vfs_options, "nodiratime")) {
		r = asprintf(ret_why, "mount options '%s' lack noatime,nodiratime", e.vfs_options);
		r = -EINVAL;
	} else if (mount_is_shared(&e)) {
		r = asprintf(ret_why, "mount is shared (%s), expected private", e.optional);
		r = -EINVAL;
	} else {
		*ret_entry = e;
		return 0;
	}
	mount_entry_done(&e);
	return r;
}

static int open_subdir(int parent, const char *name, mode_t mode, dev_t dev)
{
	struct stat st;
	int fd, r;

	r = mkdirat_exist_ok(parent, name, mode);
	if (r < 0)
		return r;
	fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	if (fstat(fd, &st) < 0 || st.st_dev != dev) {
		(void)close(fd);
		return -EXDEV;
	}
	return fd;
}

static int lay_out(Partition *part)
{
	struct stat st;
	struct statfs sf;
	int r;

	part->root_fd = open(part->mountpoint, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (part->root_fd < 0)
		return negative_errno();
	if (fstat(part->root_fd, &st) < 0 || fstatfs(part->root_fd, &sf) < 0)
		return negative_errno();
	if (st.st_dev != part->dev || sf.f_type != XFS_SUPER_MAGIC)
		return -EXDEV;

	r = part->tree_fd = open_subdir(part->root_fd, "nvmevol", 0711, part->dev);
	if (r >= 0)
		r = part->volumes_fd = open_subdir(part->tree_fd, "volumes", 0711, part->dev);
	if (r >= 0)
		r = part->meta_fd = open_subdir(part->tree_fd, "meta", 0700, part->dev);
	if (r >= 0)
		r = part->trash_fd = open_subdir(part->tree_fd, "trash", 0700, part->dev);
	if (r >= 0)
		r = part->scratch_fd = open_subdir(part->tree_fd, "selftest", 0700, part->dev);
	if (r >= 0)
		r = part->quarantine_fd = open_subdir(part->tree_fd, "quarantine", 0700, part->dev);
	if (r < 0)
		return r;
	if (fsync(part->tree_fd) < 0 || fsync(part->root_fd) < 0)
		return negative_errno();
	(void)remove_atomic_tmp_files(part->meta_fd);
	return 0;
}

/* Mounts (or adopts an existing correct mount of) one XFS filesystem and lays it out. */
static int attach(Pool *p, Partition *part, const ProbedDevice *d)
{
	_cleanup_free_ char *why = NULL;
	MountEntry e = { 0 };
	struct stat st;
	bool mounted_here = false;
	int r;

	close_fds(part);
	part->present = false;
	snprintf(part->device, sizeof(part->device), "%s", d->device);
	snprintf(part->label, sizeof(part->label), "%s", d->label ? d->label : "");
	part->logical_sector_size = d->logical_sector_size;

	if (stat(d->device, &st) < 0 || !S_ISBLK(st.st_mode)) {
		set_problem(part, "%s is not a block device", d->device);
		return -ENOTBLK;
	}
	part->dev = st.st_rdev;

	r = mkdirat_exist_ok(AT_FDCWD, p->cfg->partition_root, 0700);
	if (r < 0) {
		set_problem(part, "cannot create %s: %s", p->cfg->partition_root, strerror(-r));
		return r;
	}
	r = mkdirat_exist_ok(AT_FDCWD, part->mountpoint, 0700);
	if (r < 0) {
		set_problem(part, "cannot create %s: %s", part->mountpoint, strerror(-r));
		return r;
	}

	r = check_mount(part, part->dev, &e, &why);
	if (r == -ENOENT || r == -ENXIO) {
		/* Not mounted, or a stale mount of a device that went away: mount afresh. */
		if (r == -ENXIO)
			(void)unmount_path(part->mountpoint);
		free(why);
		why = NULL;
		part->quota = false;
		r = mount_filesystem(d->device, part->mountpoint, "xfs", PARTITION_MOUNT_OPTIONS ",prjquota", &why);
		if (r == 0)
			part->quota = true;
		else {
			free(why);
			why = NULL;
			r = mount_filesystem(d->device, part->mountpoint, "xfs", PARTITION_MOUNT_OPTIONS, &why);
		}
		if (r < 0) {
			set_problem(part, "mount of %s failed: %s", d->device, why ? why : strerror(-r));
			return r;
		}
		mounted_here = true;
		free(why);
		why = NULL;
		r = check_mount(part, part->dev, &e, &why);
	}
	if (r < 0) {
		set_problem(part, "%s at %s: %s", d->device, part->mountpoint, why ? why : strerror(-r));
		if (mounted_here)
			(void)unmount_path(part->mountpoint);
		return r;
	}
	snprintf(part->verified_options, sizeof(part->verified_options), "%s", e.vfs_options);
	part->quota = mount_options_contain(e.fs_options, "prjquota") || mount_options_contain(e.fs_options, "pquota");
	mount_entry_done(&e);

	r = lay_out(part);
	if (r < 0) {
		set_problem(part, "cannot prepare nvmevol directories on %s: %s", d->device, strerror(-r));
		close_fds(part);
		if (mounted_here)
			(void)unmount_path(part->mountpoint);
		return r;
	}
	if (part->quota) {
		bool ok = false;
		if (quota_probe(part->root_fd, &ok) < 0 || !ok)
			part->quota = false;
	}
	free(part->problem);
	part->problem = NULL;
	part->present = true;
	log_info("partition %s (%s, UUID %s) ready at %s with %s%s", part->label, part->device, part->uuid,
		 part->mountpoint, part->verified_options, part->quota ? ", project quota on" : "");
	return 0;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

bool partition_verify_recent(Pool *p, Partition *part, unsigned max_age_ms)
{
	uint64_t last;

	pthread_mutex_lock(&p->lock);
	last = part->verified_at_ms;
	pthread_mutex_unlock(&p->lock);
	if (part->present && last && now_ms() - last < max_age_ms)
		return true;
	return partition_verify(p, part);
}

bool partition_verify(Pool *p, Partition *part)
{
	_cleanup_free_ char *why = NULL;
	MountEntry e = { 0 };
	struct stat st;
	int r;

	pthread_mutex_lock(&p->lock);
	if (!part->present) {
		pthread_mutex_unlock(&p->lock);
		return false;
	}
	r = check_mount(part, part->dev, &e, &why);
	if (r == 0 && (fstatat(part->tree_fd, "volumes", &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != part->dev)) {
		r = -EIO;
		free(why);
		why = strdup("filesystem does not answer (I/O error or shut down)");
	}
	mount_entry_done(&e);
	part->verified_at_ms = now_ms();
	if (r < 0) {
		part->present = false;
		set_problem(part, "%s: %s", part->device, why ? why : strerror(-r));
		log_warning("partition %s (UUID %s) is no longer usable: %s", part->label, part->uuid, part->problem);
	}
	pthread_mutex_unlock(&p->lock);
	return r == 0;
}

static Partition *partition_new(const Config *cfg, const char *uuid)
{
	Partition *part = calloc(1, sizeof(*part));

	if (!part)
		return NULL;
	snprintf(part->uuid, sizeof(part->uuid), "%s", uuid);
	if (asprintf(&part->mountpoint, "%s/%s", cfg->partition_root, uuid) < 0) {
		free(part);
		return NULL;
	}
	part->root_fd = part->tree_fd = part->volumes_fd = part->meta_fd = -EBADF;
	part->trash_fd = part->scratch_fd = part->quarantine_fd = -EBADF;
	pthread_mutex_init(&part->selftest_lock, NULL);
	return part;
}

static bool uuid_is_sane(const char *u)
{
	size_t n = strlen(u);

	if (n == 0 || n > 36)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((u[i] >= '0' && u[i] <= '9') || (u[i] >= 'a' && u[i] <= 'f') || (u[i] >= 'A' && u[i] <= 'F') ||
		      u[i] == '-'))
			return false;
	return true;
}

int pool_scan(Pool *p)
{
	ProbedDevice *devs = NULL;
	size_t n = 0;
	bool *seen;
	int r;

	r = probe_scan(p->cfg->label_prefix, p->cfg->devices, p->cfg->n_devices, &devs, &n);
	if (r < 0)
		return log_error_errno(r, "partition discovery failed");

	pthread_mutex_lock(&p->lock);
	seen = calloc(p->n + n + 1, sizeof(bool));
	if (!seen) {
		pthread_mutex_unlock(&p->lock);
		probed_devices_free(devs, n);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		ProbedDevice *d = &devs[i];
		Partition *part;

		if (!d->fstype) {
			log_warning("device %s: no filesystem found or cannot be resolved; left alone", d->device);
			continue;
		}
		if (!streq(d->fstype, "xfs")) {
			log_warning("device %s (label '%s') holds %s, not xfs; left alone", d->device,
				    d->label ? d->label : "", d->fstype);
			continue;
		}
		if (!d->uuid || !uuid_is_sane(d->uuid)) {
			log_warning("device %s: XFS without a usable UUID; left alone", d->device);
			continue;
		}
		part = find_uuid_locked(p, d->uuid);
		if (part && part->present && part->dev) {
			struct stat st;
			if (stat(d->device, &st) == 0 && st.st_rdev == part->dev) {
				for (size_t k = 0; k < p->n; k++)
					if (p->parts[k] == part)
						seen[k] = true;
				continue;
			}
		}
		if (!part) {
			Partition **np;
			if (p->n >= MAX_PARTITIONS) {
				log_warning("more than %d partitions; %s ignored", MAX_PARTITIONS, d->device);
				continue;
			}
			part = partition_new(p->cfg, d->uuid);
			np = part ? realloc(p->parts, (p->n + 1) * sizeof(*np)) : NULL;
			if (!np) {
				free(part);
				r = -ENOMEM;
				break;
			}
			p->parts = np;
			p->parts[p->n++] = part;
		} else {
			for (size_t k = 0; k < p->n; k++)
				if (p->parts[k] == part) {
					if (seen[k]) {
						log_warning("device %s: duplicate XFS UUID %s (already using %s); left alone",
							    d->device, d->uuid, part->device);
						part = NULL;
					}
					break;
				}
			if (!part)
				continue;
		}
		for (size_t k = 0; k < p->n; k++)
			if (p->parts[k] == part)
				seen[k] = true;
		if (attach(p, part, d) < 0)
			log_warning("partition %s (UUID %s) refused: %s", d->label ? d->label : "", d->uuid,
				    part->problem ? part->problem : "unknown error");
	}
	for (size_t k = 0; k < p->n; k++)
		if (!seen[k] && p->parts[k]->present) {
			p->parts[k]->present = false;
			set_problem(p->parts[k], "device %s is no longer detected", p->parts[k]->device);
			log_warning("partition %s (UUID %s) disappeared", p->parts[k]->label, p->parts[k]->uuid);
		}
	clock_gettime(CLOCK_MONOTONIC, &p->last_scan);
	p->scanned = true;
	pthread_mutex_unlock(&p->lock);
	free(seen);
	probed_devices_free(devs, n);
	return r;
}

int pool_rescan_if_stale(Pool *p, unsigned min_interval_ms)
{
	struct timespec now;
	int64_t elapsed;

	clock_gettime(CLOCK_MONOTONIC, &now);
	pthread_mutex_lock(&p->lock);
	elapsed = (now.tv_sec - p->last_scan.tv_sec) * 1000 + (now.tv_nsec - p->last_scan.tv_nsec) / 1000000;
	if (p->scanned && elapsed < (int64_t)min_interval_ms) {
		pthread_mutex_unlock(&p->lock);
		return 0;
	}
	pthread_mutex_unlock(&p->lock);
	return pool_scan(p);
}
