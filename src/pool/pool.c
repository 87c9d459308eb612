/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <time.h>

#include "device/device-policy.h"
#include "device/device.h"
#include "clone/freeze.h"
#include "pool/mount.h"
#include "pool/pool.h"
#include "device/probe-deadline.h"
#include "device/probe.h"
#include "pool/quota.h"
#include "pool/serving.h"
#include "util/time-util.h"
#include "util/deadline-call.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/strutil.h"

#define XFS_SUPER_MAGIC 0x58465342
#define MAX_PARTITIONS 256
#define TREE_DIR "nvmevol" /* nvmevol's tree at the root of a partition */
#define TREE_DIR_MODE 0711

struct Pool {
	const Settings *cfg;
	pthread_mutex_t lock;      /* every Partition field but uuid/mountpoint; the array; last_scan */
	pthread_mutex_t scan_lock; /* one scan or adoption at a time */
	Partition **parts;
	size_t n;
	uint64_t last_scan_ms;
	uint32_t devices_crc; /* of /proc/partitions when the last scan began */
	bool scanned; /* the first scan is done: later ones apply the trust rule */
	PoolSilentDevice *silent; /* devices whose probe did not answer at the last scan */
	size_t n_silent;
	int freeze_dir_fd; /* the freeze markers (freeze.h), or -EBADF; set before the first scan */
};


int pool_new(const Settings *cfg, Pool **ret)
{
	Pool *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->cfg = cfg;
	p->freeze_dir_fd = -EBADF;
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_init(&p->scan_lock, NULL);
	*ret = p;
	return 0;
}

/* ---- PartitionFs: the open directories of one mount, shared by reference ---- */

static PartitionFs *partition_fs_new(void)
{
	PartitionFs *fs = calloc(1, sizeof(*fs));

	if (!fs)
		return NULL;
	fs->root_fd = fs->tree_fd = fs->volumes_fd = fs->meta_fd = -EBADF;
	fs->trash_fd = fs->scratch_fd = fs->quarantine_fd = fs->snapshots_fd = fs->imports_fd = fs->serving_fd = -EBADF;
	fs->refs = 1;
	return fs;
}

void partition_fs_put(PartitionFs *fs)
{
	int *fds[10];

	if (!fs || __atomic_sub_fetch(&fs->refs, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	fds[0] = &fs->root_fd, fds[1] = &fs->tree_fd, fds[2] = &fs->volumes_fd, fds[3] = &fs->meta_fd;
	fds[4] = &fs->trash_fd, fds[5] = &fs->scratch_fd, fds[6] = &fs->quarantine_fd, fds[7] = &fs->snapshots_fd;
	fds[8] = &fs->imports_fd, fds[9] = &fs->serving_fd;
	for (size_t i = 0; i < ELEMENTSOF(fds); i++)
		if (*fds[i] >= 0)
			(void)close(*fds[i]);
	free(fs);
}

PartitionFs *partition_fs_get(Pool *p, Partition *part)
{
	PartitionFs *fs;

	pthread_mutex_lock(&p->lock);
	fs = part->present ? part->fs : NULL;
	if (fs)
		__atomic_add_fetch(&fs->refs, 1, __ATOMIC_ACQ_REL);
	pthread_mutex_unlock(&p->lock);
	return fs;
}

int partition_fs_free_bytes(const PartitionFs *fs, uint64_t *ret_free, uint64_t *ret_total)
{
	struct statvfs sv;

	if (!fs || fs->root_fd < 0)
		return -ENODEV;
	if (fstatvfs(fs->root_fd, &sv) < 0)
		return negative_errno();
	if (ret_free)
		*ret_free = (uint64_t)sv.f_bavail * sv.f_frsize;
	if (ret_total)
		*ret_total = (uint64_t)sv.f_blocks * sv.f_frsize;
	return 0;
}

/* ---- the array ---- */

Pool *pool_free(Pool *p)
{
	if (!p)
		return NULL;
	for (size_t i = 0; i < p->n; i++) {
		partition_fs_put(p->parts[i]->fs);
		free(p->parts[i]->mountpoint);
		free(p->parts[i]->selftest_cache);
		pthread_mutex_destroy(&p->parts[i]->selftest_lock);
		free(p->parts[i]->health_cache);
		pthread_mutex_destroy(&p->parts[i]->health_lock);
		free(p->parts[i]);
	}
	free(p->parts);
	free(p->silent);
	pthread_mutex_destroy(&p->lock);
	pthread_mutex_destroy(&p->scan_lock);
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

static void set_problem_locked(Partition *part, const char *fmt, ...) _printf_(2, 3);
static void set_problem_locked(Partition *part, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(part->problem, sizeof(part->problem), fmt, ap);
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

Partition *pool_find_ref(Pool *p, const char *ref, bool present_only)
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

static Partition *partition_new(const Settings *cfg, const char *uuid)
{
	Partition *part = calloc(1, sizeof(*part));

	if (!part)
		return NULL;
	snprintf(part->uuid, sizeof(part->uuid), "%s", uuid);
	if (asprintf(&part->mountpoint, "%s/%s", cfg->partition_root, uuid) < 0) {
		free(part);
		return NULL;
	}
	snprintf(part->problem, sizeof(part->problem), "not detected; is the disk attached?");
	pthread_mutex_init(&part->selftest_lock, NULL);
	pthread_mutex_init(&part->health_lock, NULL);
	return part;
}

/* Adds a new, absent partition to the array. */
static Partition *add_locked(Pool *p, const char *uuid)
{
	Partition *part;
	Partition **np;

	if (p->n >= MAX_PARTITIONS)
		return NULL;
	part = partition_new(p->cfg, uuid);
	np = part ? realloc(p->parts, (p->n + 1) * sizeof(*np)) : NULL;
	if (!np) {
		if (part)
			free(part->mountpoint);
		free(part);
		return NULL;
	}
	p->parts = np;
	p->parts[p->n++] = part;
	return part;
}

Partition *pool_add_known(Pool *p, const char *uuid, const char *label)
{
	Partition *part;

	pthread_mutex_lock(&p->lock);
	part = find_uuid_locked(p, uuid);
	if (!part) {
		part = add_locked(p, uuid);
		if (part)
			snprintf(part->label, sizeof(part->label), "%s", label);
	}
	pthread_mutex_unlock(&p->lock);
	return part;
}

void partition_snapshot(Pool *p, Partition *part, PartitionInfo *ret)
{
	pthread_mutex_lock(&p->lock);
	memcpy(ret->uuid, part->uuid, sizeof(ret->uuid));
	memcpy(ret->label, part->label, sizeof(ret->label));
	memcpy(ret->device, part->device, sizeof(ret->device));
	memcpy(ret->problem, part->problem, sizeof(ret->problem));
	memcpy(ret->verified_options, part->verified_options, sizeof(ret->verified_options));
	memcpy(ret->duplicates, part->duplicates, sizeof(ret->duplicates));
	ret->present = part->present;
	ret->adopted = part->adopted;
	ret->read_only = part->fs ? part->fs->read_only : false;
	ret->quota = part->fs ? part->fs->quota : false;
	ret->dev = part->dev;
	ret->logical_sector_size = part->logical_sector_size;
	ret->cordon = part->cordon;
	pthread_mutex_unlock(&p->lock);
}

void partition_device_snapshot(Pool *p, Partition *part, PartitionDevice *ret)
{
	pthread_mutex_lock(&p->lock);
	*ret = part->device_info;
	pthread_mutex_unlock(&p->lock);
}

void partition_set_health_rank(Pool *p, Partition *part, PartitionHealthRank rank)
{
	pthread_mutex_lock(&p->lock);
	part->health_rank = rank;
	pthread_mutex_unlock(&p->lock);
}

void partition_set_cordon(Pool *p, Partition *part, const PartitionCordon *c)
{
	pthread_mutex_lock(&p->lock);
	part->cordon = *c;
	pthread_mutex_unlock(&p->lock);
}

void partition_display_name(const PartitionInfo *info, char *buf, size_t len)
{
	label_escape(info->label, buf, len);
	if (!buf[0])
		snprintf(buf, len, "%s", info->uuid);
}

/* Lower is better: health first, then NVMe before other disks. */
static unsigned placement_rank(const Partition *part)
{
	const DeviceFacts *f = &part->device_info.facts;
	bool nvme = part->device_info.has_facts && f->transport == DEVICE_TRANSPORT_NVME && !f->rotational;

	return (unsigned)part->health_rank * 2 + (nvme ? 0 : 1);
}

Partition *pool_pick_most_free(Pool *p)
{
	Partition *best = NULL;
	uint64_t best_free = 0;
	unsigned best_rank = 0;

	/* fstatvfs under the pool mutex: one cheap syscall per partition, no I/O wait. */
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->n; i++) {
		Partition *part = p->parts[i];
		unsigned rank = placement_rank(part);
		uint64_t f;

		if (!part->present || !part->adopted || !part->fs || part->fs->read_only ||
		    part->health_rank == PARTITION_HEALTH_REFUSED || part->cordon.on ||
		    partition_fs_free_bytes(part->fs, &f, NULL) < 0)
			continue;
		if (!best || rank < best_rank || (rank == best_rank && f > best_free)) {
			best = part;
			best_free = f;
			best_rank = rank;
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
		char label[PARTITION_LABEL_MAX * 4];

		if (!p->parts[i]->present)
			continue;
		label_escape(p->parts[i]->label, label, sizeof(label));
		fprintf(f, "%s%s (%s)%s%s", any ? ", " : "", label[0] ? label : "no label", p->parts[i]->uuid,
			p->parts[i]->adopted ? "" : " [read-only, not adopted]",
			p->parts[i]->cordon.on ? " [cordoned: 'nvmevol partition uncordon' lifts it]" : "");
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

/* ---- mounting and verification ---- */

static char *why_printf(const char *fmt, ...) _printf_(1, 2);
static char *why_printf(const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

/*
 * Checks the kernel's view of the mount at @mountpoint: XFS from @want_dev, the
 * whole filesystem, noatime,nodiratime,nosuid,nodev, read-only exactly when
 * @read_only, never shared. 0 and the entry, or -errno and *ret_why.
 */
static int check_mount(const char *mountpoint, dev_t want_dev, bool read_only, MountEntry *ret_entry, char **ret_why)
{
	static const char *const required[] = { "noatime", "nodiratime", "nosuid", "nodev" };
	MountEntry e = { 0 };
	int r;

	*ret_why = NULL;
	r = mountinfo_find_target(mountpoint, &e);
	if (r == -ENOENT) {
		*ret_why = why_printf("not mounted");
		return -ENOENT;
	}
	if (r < 0)
		return r;
	if (!streq(e.fstype, "xfs")) {
		*ret_why = why_printf("mounted as %s, not xfs", e.fstype);
		r = -EMEDIUMTYPE;
	} else if (want_dev && e.dev != want_dev) {
		*ret_why = why_printf("mount shows device %u:%u, expected %u:%u", major(e.dev), minor(e.dev),
				      major(want_dev), minor(want_dev));
		r = -ENXIO;
	} else if (!streq(e.root, "/")) {
		*ret_why = why_printf("mount root is %s, not the filesystem root", e.root);
		r = -EINVAL;
	} else if (mount_is_shared(&e)) {
		*ret_why = why_printf("mount is shared (%s), expected private", e.optional);
		r = -EINVAL;
	} else if (!read_only && mount_options_contain(e.fs_options, "ro")) {
		*ret_why = why_printf("the filesystem is read-only ('%s')", e.fs_options);
		r = -EROFS;
	} else if (mount_options_contain(e.vfs_options, "ro") != read_only) {
		*ret_why = why_printf("mount options '%s' are not %s", e.vfs_options, read_only ? "ro" : "rw");
		r = -EPERM;
	} else {
		for (size_t i = 0; i < ELEMENTSOF(required) && r == 0; i++)
			if (!mount_options_contain(e.vfs_options, required[i])) {
				*ret_why = why_printf("mount options '%s' lack %s", e.vfs_options, required[i]);
				r = -EPERM;
			}
		if (r == 0) {
			*ret_entry = e;
			return 0;
		}
	}
	mount_entry_done(&e);
	return r;
}

int pool_open_subdir(int parent, const char *name, mode_t mode, dev_t dev, bool create, bool *created)
{
	struct stat st;
	int fd, r;

	if (create) {
		r = mkdirat_exist_ok(parent, name, mode);
		if (r < 0)
			return r;
		*created = *created || r > 0;
	}
	fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno != ENOENT) /* once more: a refused partition hides all its volumes */
		fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	if (fstat(fd, &st) < 0 || st.st_dev != dev) {
		(void)close(fd);
		return -EXDEV;
	}
	return fd;
}

/* 1 if nvmevol/@name exists and holds anything, 0 if it is empty or missing. */
static int subdir_has_entries(int tree_fd, const char *name)
{
	_cleanup_close_ int fd = openat(tree_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (fd < 0)
		return errno == ENOENT ? 0 : negative_errno();
	d = opendir_fd(fd);
	if (!d)
		return negative_errno();
	errno = 0;
	while ((de = readdir(d)))
		if (!streq(de->d_name, ".") && !streq(de->d_name, "..")) {
			r = 1;
			break;
		}
	if (!de && errno != 0)
		r = negative_errno();
	closedir(d);
	return r;
}

/*
 * The records and the data they describe are one: a missing meta/ next to a
 * volumes/ that holds anything (or the reverse) means the half that is left
 * has lost its other half (xfs_repair, a partial restore, a rename by hand).
 * Making the missing one anew would turn every volume into an orphan: the
 * partition is refused instead, and nothing on it is touched.
 */
static int check_halves(int tree_fd, char **ret_why)
{
	static const char *const pair[2][2] = { { "meta", "volumes" }, { "volumes", "meta" } };
	struct stat st;

	for (size_t i = 0; i < ELEMENTSOF(pair); i++) {
		int r;

		if (fstatat(tree_fd, pair[i][0], &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
			continue;
		r = subdir_has_entries(tree_fd, pair[i][1]);
		if (r < 0)
			return r;
		if (r > 0) {
			*ret_why = why_printf("nvmevol/%s is missing while nvmevol/%s holds entries: the %s were lost or "
					      "moved. Nothing was changed and the partition is not used; put nvmevol/%s "
					      "back (rename it back, or restore it from a backup), then restart the plugin",
					      pair[i][0], pair[i][1], i == 0 ? "volume records" : "volumes' directories",
					      pair[i][0]);
			return -ENOENT;
		}
	}
	return 0;
}

/*
 * Opens nvmevol's directories on the mounted filesystem (creating them when
 * writable, but never a lost half: check_halves()). A read-only filesystem
 * without them simply has no volumes.
 */
static int lay_out(const char *mountpoint, PartitionFs *fs, char **ret_why)
{
	struct {
		const char *name;
		mode_t mode;
		int *fd;
	} dirs[] = {
		{ "volumes", 0711, &fs->volumes_fd },  { "meta", 0700, &fs->meta_fd },
		{ "trash", 0700, &fs->trash_fd },      { "selftest", 0700, &fs->scratch_fd },
		{ "quarantine", 0700, &fs->quarantine_fd }, { "snapshots", 0700, &fs->snapshots_fd },
		{ "imports", 0700, &fs->imports_fd },
	};
	bool create = !fs->read_only, created = false;
	struct stat st;
	struct statfs sf;
	int r;

	fs->root_fd = open(mountpoint, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fs->root_fd < 0)
		return negative_errno();
	if (fstat(fs->root_fd, &st) < 0 || fstatfs(fs->root_fd, &sf) < 0)
		return negative_errno();
	if (st.st_dev != fs->dev || sf.f_type != XFS_SUPER_MAGIC)
		return -EXDEV;

	r = pool_open_subdir(fs->root_fd, TREE_DIR, TREE_DIR_MODE, fs->dev, create, &created);
	if (r == -ENOENT && !create)
		return 0;
	if (r < 0)
		return r;
	fs->tree_fd = r;
	if (create) {
		r = check_halves(fs->tree_fd, ret_why);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
		r = pool_open_subdir(fs->tree_fd, dirs[i].name, dirs[i].mode, fs->dev, create, &created);
		if (r == -ENOENT && !create)
			continue;
		if (r < 0)
			return r;
		*dirs[i].fd = r;
	}
	if (!create)
		return 0;
	/* New directories are made durable; on a laid-out partition nothing was written. */
	if (created && (fsync(fs->tree_fd) < 0 || fsync(fs->root_fd) < 0))
		return negative_errno();
	(void)remove_atomic_tmp_files(fs->meta_fd);
	return 0;
}

/* Sets the per-mount flags nvmevol requires on an existing mount of the right device (an older version's). */
static int fix_mount_flags(const char *mountpoint, bool read_only)
{
	struct mount_attr attr = {
		.attr_set = MOUNT_ATTR_NOATIME | MOUNT_ATTR_NODIRATIME | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
			    (read_only ? MOUNT_ATTR_RDONLY : 0),
		.attr_clr = MOUNT_ATTR__ATIME | (read_only ? 0 : MOUNT_ATTR_RDONLY),
	};

	if (mount_setattr(AT_FDCWD, mountpoint, AT_SYMLINK_NOFOLLOW, &attr, sizeof(attr)) < 0)
		return negative_errno();
	return 0;
}

/*
 * Reads the device facts of @d into @part and applies the device rule (pool.h).
 * -EPERM and *ret_why (the facts, the setting, how to allow it) if refused.
 */
static int check_device(Pool *p, Partition *part, const ProbedDevice *d, char **ret_why)
{
	_cleanup_free_ char *err = NULL;
	PartitionDevice info = { .listed = d->listed };
	DeviceDecision dec;
	char line[2048];

	if (device_facts_read(d->device, &info.facts, &err) == 0)
		info.has_facts = true;
	else
		snprintf(info.facts_error, sizeof(info.facts_error), "%s", err ? err : "unknown error");
	pthread_mutex_lock(&p->lock);
	part->device_info = info;
	pthread_mutex_unlock(&p->lock);

	if (!info.has_facts) {
		/* Unknown means "maybe removable": only an explicit listing lets it in. */
		if (d->listed) {
			log_warning("device %s: %s; listed in NVMEVOL_DEVICES, so used anyway", d->device, info.facts_error);
			return 0;
		}
		*ret_why = why_printf("cannot tell whether %s is removable (%s): refused; list it in NVMEVOL_DEVICES to use it",
				      d->device, info.facts_error);
		return -EPERM;
	}
	device_policy_evaluate(&(DevicePolicySettings){ .require_nvme = p->cfg->require_nvme, .health = DEVICE_POLICY_OFF },
			       &(DeviceInputs){ .facts = &info.facts, .uuid = d->uuid, .listed = d->listed }, &dec);
	if (dec.verdict == DEVICE_VERDICT_REFUSE) {
		device_decision_format(&dec, DEVICE_VERDICT_REFUSE, line, sizeof(line));
		*ret_why = why_printf("refused by the device rule: %s", line);
		return -EPERM;
	}
	return 0;
}

/* Records the XFS geometry of a fresh mount and logs what the device rule warns about. */
static void note_geometry(Pool *p, Partition *part, const PartitionFs *fs)
{
	PartitionDevice info;
	DeviceDecision dec;
	char line[2048];

	XfsGeometry geo;
	bool has_xfs = xfs_geometry_read(fs->root_fd, &geo) == 0; /* the ioctl outside the pool mutex */

	pthread_mutex_lock(&p->lock);
	part->device_info.has_xfs = has_xfs;
	if (has_xfs)
		part->device_info.xfs = geo;
	info = part->device_info;
	pthread_mutex_unlock(&p->lock);
	if (!info.has_facts)
		return;
	device_policy_evaluate(&(DevicePolicySettings){ .require_nvme = p->cfg->require_nvme, .health = DEVICE_POLICY_OFF },
			       &(DeviceInputs){ .facts = &info.facts, .listed = info.listed,
						.xfs = info.has_xfs ? &info.xfs : NULL }, &dec);
	if (dec.verdict == DEVICE_VERDICT_WARN) {
		device_decision_format(&dec, DEVICE_VERDICT_WARN, line, sizeof(line));
		log_warning("partition UUID %s on %s: %s", part->uuid, info.facts.devnode, line);
	}
}

void pool_set_freeze_dir(Pool *p, int dir_fd)
{
	p->freeze_dir_fd = dir_fd;
}

/*
 * Before anything is written to the mount: a frozen filesystem makes every
 * write wait. Thaws what a crash of ours left frozen (the marker says so).
 * A read-write attach then checks that the filesystem takes writes, without
 * freezing it (freeze_probe_writes()); one that does not (someone else's
 * freeze, or a device that does not answer) is left alone and kept out
 * (-ETIMEDOUT) until a scan finds it answering: the probe's late answer
 * causes that scan (devices_fingerprint()). A read-only attach writes
 * nothing, so it is not probed.
 */
static int recover_freeze(Pool *p, Partition *part, const char *device, bool read_only, char **why)
{
	_cleanup_close_ int fd = open(part->mountpoint, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	const FreezeMarker m = { .dir_fd = p->freeze_dir_fd, .name = part->uuid };
	int r;

	if (fd < 0)
		return 0; /* the layout's open says why */
	r = freeze_recover(fd, p->freeze_dir_fd >= 0 ? &m : NULL);
	if (r > 0)
		log_warning("partition on %s was frozen by nvmevol (a freeze interrupted by a crash): thawed", device);
	else if (r < 0)
		log_warning("partition on %s: cannot thaw what nvmevol froze: %s", device, errno_str(r));
	if (read_only)
		return 0;
	r = freeze_probe_writes(fd, TREE_DIR, TREE_DIR_MODE);
	if (r == -ETIMEDOUT) {
		*why = why_printf("%s does not take writes: frozen by someone else (fsfreeze), or its device does not "
				  "answer writes: not served until it does; 'fsfreeze --unfreeze %s' if it was frozen",
				  device, part->mountpoint);
		return r;
	}
	if (r < 0)
		log_warning("partition on %s: cannot check whether it takes writes: %s", device, errno_str(r));
	return 0;
}

/*
 * Makes @mountpoint a verified mount of @device (number @rdev): keeps a
 * correct existing one, fixes the flags of our own earlier one, or mounts
 * afresh (with prjquota when the kernel takes it). Sets *mounted_here when it
 * mounted, so that a later failure can undo it.
 */
static int mount_verified(const char *device, const char *mountpoint, dev_t rdev, bool read_only, MountEntry *e,
			  bool *mounted_here, char **why)
{
	char options[128];
	int r;

	r = check_mount(mountpoint, rdev, read_only, e, why);
	if (r == -EPERM) {
		/* Our mount from an earlier run with other flags: set them, then look again. */
		free(TAKE_PTR(*why));
		if (fix_mount_flags(mountpoint, read_only) == 0)
			r = check_mount(mountpoint, rdev, read_only, e, why);
	}
	if (r == -ENOENT || r == -ENXIO || r == -EROFS || r == -EPERM) {
		/* Not mounted, a stale mount of a device that went away, or the wrong mode: mount afresh. */
		if (r != -ENOENT)
			(void)unmount_path(mountpoint);
		free(TAKE_PTR(*why));
		snprintf(options, sizeof(options), "%s%s,prjquota", read_only ? "ro," : "", PARTITION_MOUNT_OPTIONS);
		r = mount_filesystem(device, mountpoint, "xfs", options, why);
		if (r < 0) {
			/* A kernel without XFS quota refuses prjquota: mount without it. */
			free(TAKE_PTR(*why));
			snprintf(options, sizeof(options), "%s%s", read_only ? "ro," : "", PARTITION_MOUNT_OPTIONS);
			r = mount_filesystem(device, mountpoint, "xfs", options, why);
		}
		if (r < 0) {
			char *w = why_printf("mount of %s failed: %s", device, *why ? *why : errno_str(r));
			free(*why);
			*why = w;
			return r;
		}
		*mounted_here = true;
		r = check_mount(mountpoint, rdev, read_only, e, why);
	}
	if (r < 0) {
		char *w = why_printf("%s at %s: %s", device, mountpoint, *why ? *why : errno_str(r));
		free(*why);
		*why = w;
	}
	return r;
}

/* Opens the nvmevol directories of a verified mount (creating them if need be) and probes its quota. */
static int open_layout(const Partition *part, const char *device, dev_t rdev, bool read_only, const MountEntry *e,
		       PartitionFs **ret, char **why)
{
	PartitionFs *fs;
	int r;

	fs = partition_fs_new();
	if (!fs)
		return -ENOMEM;
	fs->dev = rdev;
	fs->read_only = read_only;
	fs->quota = mount_options_contain(e->fs_options, "prjquota") || mount_options_contain(e->fs_options, "pquota");
	r = lay_out(part->mountpoint, fs, why);
	if (r < 0) {
		char *w = *why ? why_printf("%s: %s", device, *why)
			       : why_printf("cannot prepare nvmevol directories on %s: %s", device, errno_str(r));
		free(*why);
		*why = w;
		partition_fs_put(fs);
		return r;
	}
	if (fs->quota) {
		bool ok = false;
		/*
		 * The mount says prjquota: only a kernel that answers "not enforced" turns it off. A read
		 * error is no such answer, and taking it for one would serve limited volumes unlimited;
		 * the limits are set and checked (at start, at each first mount) and those calls report it.
		 */
		r = quota_probe(fs->root_fd, &ok);
		if (r < 0)
			log_warning_errno(r, "cannot read the quota state of %s; assuming the project quota its mount "
					  "options give", device);
		else if (!ok)
			fs->quota = false;
	}
	*ret = fs;
	return 0;
}

/* Publishes @fs as @part's filesystem under the pool mutex, and says so in the log. */
static void install(Pool *p, Partition *part, PartitionFs *fs, dev_t rdev, bool adopt, const MountEntry *e,
		    const ProbedDevice *d)
{
	char label[PARTITION_LABEL_MAX * 4];
	PartitionCordon cordon;
	int r;

	/* The cordon travels with the disk: what the partition says now replaces what this run knew. */
	r = fs->tree_fd >= 0 ? cordon_read(fs->tree_fd, &cordon) : (cordon = (PartitionCordon){ 0 }, 0);
	if (r < 0)
		log_warning_errno(r, "partition UUID %s: cannot read nvmevol/%s; taking it as cordoned (%s)", part->uuid,
				  CORDON_RECORD, cordon.reason[0] ? cordon.reason : "unreadable");
	if (r < 0 && !cordon.on) {
		cordon.on = true;
		cordon.by = CORDON_BY_ADMIN;
		snprintf(cordon.reason, sizeof(cordon.reason), "nvmevol/%s is unreadable: %s", CORDON_RECORD, errno_str(r));
	}

	pthread_mutex_lock(&p->lock);
	part->cordon = cordon;
	part->fs = fs;
	part->dev = rdev;
	part->present = true;
	part->adopted = adopt;
	part->problem[0] = '\0';
	part->held_elsewhere = false;
	snprintf(part->verified_options, sizeof(part->verified_options), "%s", e->vfs_options);
	part->verified_at_ms = now_mono_ms();
	pthread_mutex_unlock(&p->lock);

	label_escape(d->label ? d->label : "", label, sizeof(label));
	if (adopt)
		log_info("partition %s (%s, UUID %s) ready at %s with %s%s", label, d->device, part->uuid,
			 part->mountpoint, e->vfs_options, fs->quota ? ", project quota on" : "");
	else
		log_warning("partition %s (%s, UUID %s) appeared after start: mounted read-only for its existing "
			    "volumes, no new volumes until adopted ('nvmevol partition adopt %s' or a plugin restart)",
			    label, d->device, part->uuid, part->uuid);
}

/*
 * Mounts (or adopts an existing correct mount of) one XFS filesystem, lays
 * it out and installs it in @part. Runs without the pool mutex (scans are
 * serialised by scan_lock); only the final install takes it.
 */
static int attach(Pool *p, Partition *part, const ProbedDevice *d, bool adopt)
{
	_cleanup_free_ char *why = NULL;
	MountEntry e = { 0 };
	PartitionFs *fs = NULL, *old;
	struct stat st;
	bool mounted_here = false, read_only = !adopt, held = false;
	int serving_fd = -EBADF, r;

	pthread_mutex_lock(&p->lock);
	old = part->fs;
	part->fs = NULL;
	part->present = false;
	snprintf(part->device, sizeof(part->device), "%s", d->device);
	snprintf(part->label, sizeof(part->label), "%s", d->label ? d->label : "");
	part->logical_sector_size = d->logical_sector_size;
	pthread_mutex_unlock(&p->lock);
	partition_fs_put(old);

	if (stat(d->device, &st) < 0 || !S_ISBLK(st.st_mode)) {
		why = why_printf("%s is not a block device", d->device);
		r = -ENOTBLK;
		goto fail;
	}
	/* Nothing is mounted (a crafted filesystem is kernel attack surface) before the device rule allows it. */
	r = check_device(p, part, d, &why);
	if (r < 0)
		goto fail;
	r = mkdirat_exist_ok(AT_FDCWD, p->cfg->partition_root, 0700);
	if (r >= 0)
		r = mkdirat_exist_ok(AT_FDCWD, part->mountpoint, 0700);
	if (r < 0) {
		why = why_printf("cannot create %s: %s", part->mountpoint, errno_str(r));
		goto fail;
	}
	r = mount_verified(d->device, part->mountpoint, st.st_rdev, read_only, &e, &mounted_here, &why);
	if (r < 0)
		goto fail;
	/* Before anything is read or changed on it: another nvmevol may be serving it. */
	r = serving_claim(part->mountpoint, &why);
	if (r < 0) {
		held = r == -EBUSY;
		if (!why)
			why = why_printf("cannot take the serving lock of %s: %s", part->mountpoint, errno_str(r));
		goto fail;
	}
	serving_fd = r;

	r = recover_freeze(p, part, d->device, read_only, &why);
	if (r == -ETIMEDOUT)
		/*
		 * Frozen by someone else (or writes hang): the mount stays, so that
		 * the thaw the problem names can reach it (a frozen filesystem with
		 * no mount left can only be thawed through a new mount of its
		 * device); the late probe's answer makes the next scan attach it.
		 */
		mounted_here = false;
	if (r < 0)
		goto fail;

	r = open_layout(part, d->device, st.st_rdev, read_only, &e, &fs, &why);
	if (r < 0)
		goto fail;
	fs->serving_fd = TAKE_FD(serving_fd);
	if (!read_only && fs->tree_fd >= 0 && serving_record(fs->tree_fd, p->cfg) < 0)
		log_warning("partition UUID %s: cannot write nvmevol/%s (who serves it); the lock holds anyway",
			    part->uuid, SERVING_RECORD);
	note_geometry(p, part, fs);
	install(p, part, fs, st.st_rdev, adopt, &e, d);
	mount_entry_done(&e);
	return 0;

fail:
	mount_entry_done(&e);
	if (serving_fd >= 0)
		(void)close(serving_fd);
	if (mounted_here)
		(void)unmount_path(part->mountpoint);
	pthread_mutex_lock(&p->lock);
	set_problem_locked(part, "%s", why ? why : errno_str(r));
	part->held_elsewhere = held;
	pthread_mutex_unlock(&p->lock);
	return r;
}

bool partition_verify_recent(Pool *p, Partition *part, unsigned max_age_ms)
{
	bool fresh;

	pthread_mutex_lock(&p->lock);
	fresh = part->present && part->verified_at_ms && now_mono_ms() - part->verified_at_ms < max_age_ms;
	pthread_mutex_unlock(&p->lock);
	return fresh || partition_verify(p, part);
}

bool partition_verify(Pool *p, Partition *part)
{
	_cleanup_free_ char *why = NULL;
	MountEntry e = { 0 };
	PartitionFs *fs;
	struct stat st;
	dev_t dev;
	int r;

	pthread_mutex_lock(&p->lock);
	fs = part->present ? part->fs : NULL;
	if (fs)
		__atomic_add_fetch(&fs->refs, 1, __ATOMIC_ACQ_REL);
	dev = part->dev;
	pthread_mutex_unlock(&p->lock);
	if (!fs)
		return false;

	r = check_mount(part->mountpoint, dev, fs->read_only, &e, &why);
	mount_entry_done(&e);
	if (r == 0 && fs->tree_fd >= 0 &&
	    (fstatat(fs->tree_fd, ".", &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != dev)) {
		r = -EIO;
		free(why);
		why = why_printf("filesystem does not answer (I/O error or shut down)");
	}

	pthread_mutex_lock(&p->lock);
	part->verified_at_ms = now_mono_ms();
	if (r < 0 && part->fs == fs) {
		part->present = false;
		part->fs = NULL;
		set_problem_locked(part, "%s: %s", part->device, why ? why : errno_str(r));
		log_warning("partition %s (UUID %s) is no longer usable: %s", part->device, part->uuid, part->problem);
		partition_fs_put(fs); /* the partition's own reference; ours is still held */
	}
	pthread_mutex_unlock(&p->lock);
	partition_fs_put(fs);
	return r == 0;
}

/* ---- discovery ---- */

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

static bool device_is_usable(const ProbedDevice *d)
{
	char label[PARTITION_LABEL_MAX * 4];

	label_escape(d->label ? d->label : "", label, sizeof(label));
	if (!d->fstype) {
		log_warning("device %s: no filesystem found or cannot be resolved; left alone", d->device);
		return false;
	}
	if (!streq(d->fstype, "xfs")) {
		log_warning("device %s (label '%s') holds %s, not xfs; left alone", d->device, label, d->fstype);
		return false;
	}
	if (!d->uuid || !uuid_is_sane(d->uuid)) {
		log_warning("device %s: XFS without a usable UUID; left alone", d->device);
		return false;
	}
	return true;
}

static int push_partition(Partition ***arr, size_t *n, Partition *part)
{
	Partition **na = realloc(*arr, (*n + 1) * sizeof(*na));

	if (!na)
		return -ENOMEM;
	na[(*n)++] = part;
	*arr = na;
	return 0;
}

/*
 * A fingerprint of the block devices the kernel knows: /proc/partitions, and
 * each disk's diskseq, which changes when a device is re-attached even with
 * the same name and size (a loop device bound again). A few dozen reads.
 */
static uint32_t devices_fingerprint(void)
{
	_cleanup_free_ char *buf = NULL;
	_cleanup_close_ int sys = -EBADF;
	struct dirent *de;
	uint32_t crc = 0;
	uint64_t released;
	size_t len = 0;
	DIR *d;

	if (read_file_at(AT_FDCWD, "/proc/partitions", 1 << 20, &buf, &len) == 0)
		crc = crc32c(crc, buf, len);
	sys = open("/sys/block", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = sys >= 0 ? opendir_fd(sys) : NULL;
	while (d && (de = readdir(d))) {
		_cleanup_close_ int fd = -EBADF;
		char path[NAME_MAX + 16], seq[32];
		ssize_t n;

		if (de->d_name[0] == '.')
			continue;
		/* sysfs files claim a size of 4096: read them directly. */
		snprintf(path, sizeof(path), "%s/diskseq", de->d_name);
		fd = openat(sys, path, O_RDONLY | O_CLOEXEC);
		n = fd >= 0 ? read(fd, seq, sizeof(seq)) : -1;
		if (n > 0) {
			crc = crc32c(crc, de->d_name, strlen(de->d_name));
			crc = crc32c(crc, seq, (size_t)n);
		}
	}
	if (d)
		closedir(d);
	/* A device probe or a write probe that did not answer and has finished since: it may answer now. */
	released = deadline_call_released();
	return crc32c(crc, &released, sizeof(released));
}

bool pool_devices_changed(Pool *p)
{
	uint32_t crc = devices_fingerprint();
	bool changed;

	pthread_mutex_lock(&p->lock);
	changed = !p->scanned || crc != p->devices_crc;
	pthread_mutex_unlock(&p->lock);
	return changed;
}

static bool partition_in(Partition *const *arr, size_t n, const Partition *part)
{
	for (size_t i = 0; i < n; i++)
		if (arr[i] == part)
			return true;
	return false;
}

/*
 * Devices whose probe did not answer: skipped, reported (pool_silent_devices()),
 * and a present partition on one of them counts as seen: it is still mounted,
 * and partition_verify() decides whether it still works.
 */
static int note_silent(Pool *p, const ProbedDevice *stuck, size_t n_stuck, Partition ***seen, size_t *n_seen)
{
	PoolSilentDevice *now = calloc(n_stuck ? n_stuck : 1, sizeof(*now));
	int r = 0;

	if (!now)
		return -ENOMEM;
	for (size_t i = 0; i < n_stuck; i++) {
		Partition *held = NULL;
		struct stat st;
		bool known = false;

		snprintf(now[i].device, sizeof(now[i].device), "%s", stuck[i].device);
		now[i].since = (int64_t)time(NULL);
		pthread_mutex_lock(&p->lock);
		for (size_t k = 0; k < p->n_silent; k++)
			if (streq(p->silent[k].device, now[i].device)) {
				now[i].since = p->silent[k].since;
				known = true;
			}
		for (size_t k = 0; k < p->n && stat(stuck[i].device, &st) == 0; k++)
			if (p->parts[k]->present && p->parts[k]->dev == st.st_rdev)
				held = p->parts[k];
		if (held)
			snprintf(now[i].partition_uuid, sizeof(now[i].partition_uuid), "%s", held->uuid);
		pthread_mutex_unlock(&p->lock);
		if (!known)
			log_warning("device %s does not answer (its superblock was not read within %u ms): skipped until "
				    "it does%s%s", now[i].device, PROBE_DEADLINE_MS, held ? "; it holds partition UUID " : "",
				    held ? held->uuid : "");
		if (held && !partition_in(*seen, *n_seen, held) && r == 0)
			r = push_partition(seen, n_seen, held);
	}
	pthread_mutex_lock(&p->lock);
	for (size_t k = 0; k < p->n_silent; k++) {
		bool still = false;
		for (size_t i = 0; i < n_stuck; i++)
			still = still || streq(p->silent[k].device, now[i].device);
		if (!still)
			log_info("device %s answers again", p->silent[k].device);
	}
	free(p->silent);
	p->silent = now;
	p->n_silent = n_stuck;
	pthread_mutex_unlock(&p->lock);
	return r;
}

size_t pool_silent_devices(Pool *p, PoolSilentDevice **ret)
{
	size_t n;

	pthread_mutex_lock(&p->lock);
	n = p->n_silent;
	*ret = n ? malloc(n * sizeof(**ret)) : NULL;
	if (*ret)
		memcpy(*ret, p->silent, n * sizeof(**ret));
	else
		n = 0;
	pthread_mutex_unlock(&p->lock);
	return n;
}

/* The device number a mount at @path is of, or 0 when @path is not a mount point. */
static dev_t mounted_dev(const char *path)
{
	char parent[PATH_MAX];
	struct stat st, pst;

	if ((size_t)snprintf(parent, sizeof(parent), "%s/..", path) >= sizeof(parent) || stat(path, &st) < 0 ||
	    stat(parent, &pst) < 0 || st.st_dev == pst.st_dev)
		return 0;
	return st.st_dev;
}

/*
 * The device to use among @n >= 2 devices @idx[] of @devs holding one XFS
 * UUID (a dd copy of a disk): the one its partition is mounted from now, else
 * the one this run last used (device number, then serial), else the one
 * mounted at its mount point (our mount from before a restart), else the
 * first. A verified mount is never given up because another device has its UUID.
 */
static size_t pick_duplicate(Pool *p, const ProbedDevice *devs, const size_t *idx, size_t n)
{
	char mountpoint[PATH_MAX], serial[sizeof(((DeviceFacts *)0)->serial)] = "";
	dev_t used = 0, at_mountpoint;
	Partition *part;

	pthread_mutex_lock(&p->lock);
	part = find_uuid_locked(p, devs[idx[0]].uuid);
	if (part) {
		used = part->dev;
		if (part->device_info.has_facts)
			memcpy(serial, part->device_info.facts.serial, sizeof(serial));
	}
	pthread_mutex_unlock(&p->lock);
	snprintf(mountpoint, sizeof(mountpoint), "%s/%s", p->cfg->partition_root, devs[idx[0]].uuid);
	at_mountpoint = mounted_dev(mountpoint);

	for (int rule = 0; rule < 3; rule++)
		for (size_t k = 0; k < n; k++) {
			_cleanup_free_ char *err = NULL;
			DeviceFacts f;
			struct stat st;

			if (stat(devs[idx[k]].device, &st) < 0)
				continue;
			if ((rule == 0 && used && st.st_rdev == used) || (rule == 2 && at_mountpoint && st.st_rdev == at_mountpoint))
				return idx[k];
			if (rule == 1 && serial[0] && device_facts_read(devs[idx[k]].device, &f, &err) == 0 &&
			    streq(f.serial, serial))
				return idx[k];
		}
	return idx[0];
}

/*
 * Marks in @skip the usable devices that hold the XFS UUID of another one that
 * is preferred (pick_duplicate()), and puts the names of the others in that
 * one's @notes ("/dev/loop9, /dev/loop12"; malloc'd, NULL when unique).
 */
static int sort_duplicates(Pool *p, const ProbedDevice *devs, size_t n, const bool *usable, bool *skip, char **notes)
{
	_cleanup_free_ size_t *idx = calloc(n ? n : 1, sizeof(*idx));
	_cleanup_free_ bool *grouped = calloc(n ? n : 1, sizeof(*grouped));

	if (!idx || !grouped)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		size_t m = 0, best;
		char *note = NULL;

		if (!usable[i] || grouped[i])
			continue;
		for (size_t j = i; j < n; j++)
			if (usable[j] && streq(devs[j].uuid, devs[i].uuid)) {
				idx[m++] = j;
				grouped[j] = true;
			}
		if (m < 2)
			continue;
		best = pick_duplicate(p, devs, idx, m);
		for (size_t k = 0; k < m; k++) {
			char *more;

			if (idx[k] == best)
				continue;
			skip[idx[k]] = true;
			if (asprintf(&more, "%s%s%s", note ? note : "", note ? ", " : "", devs[idx[k]].device) < 0)
				return -ENOMEM;
			free(note);
			note = more;
		}
		notes[best] = note;
	}
	return 0;
}

/* Records the devices that hold copies of @part's filesystem (@note, may be NULL) and logs a change. */
static void set_duplicates(Pool *p, Partition *part, const char *device, const char *note)
{
	bool changed;

	pthread_mutex_lock(&p->lock);
	changed = !streq(part->duplicates, note ? note : "");
	snprintf(part->duplicates, sizeof(part->duplicates), "%s", note ? note : "");
	pthread_mutex_unlock(&p->lock);
	if (changed && note)
		log_warning("partition UUID %s: %s hold(s) a filesystem with the same UUID (a copy of the disk?); served "
			    "from %s, the copy is left alone (give it a new UUID with 'xfs_admin -U generate')",
			    part->uuid, note, device);
	else if (changed)
		log_info("partition UUID %s: no other device holds its UUID any more", part->uuid);
}

int pool_scan(Pool *p, Partition ***ret_attached, size_t *ret_n)
{
	uint32_t crc;
	_cleanup_free_ Partition **seen = NULL, **attached = NULL;
	size_t n_seen = 0, n_attached = 0, n = 0, n_stuck = 0;
	ProbedDevice *devs = NULL, *stuck = NULL;
	bool *usable = NULL, *skip = NULL;
	char **notes = NULL;
	int r;

	pthread_mutex_lock(&p->scan_lock);
	crc = devices_fingerprint();
	r = probe_scan(p->cfg->label_prefix, p->cfg->devices, p->cfg->n_devices, PROBE_DEADLINE_MS, &devs, &n, &stuck,
		       &n_stuck);
	if (r < 0) {
		pthread_mutex_unlock(&p->scan_lock);
		return log_error_errno(r, "partition discovery failed");
	}

	log_debug("scan: %zu candidate device(s)", n);
	usable = calloc(n ? n : 1, sizeof(*usable));
	skip = calloc(n ? n : 1, sizeof(*skip));
	notes = calloc(n ? n : 1, sizeof(*notes));
	if (!usable || !skip || !notes)
		r = -ENOMEM;
	for (size_t i = 0; i < n && r == 0; i++)
		usable[i] = device_is_usable(&devs[i]);
	if (r == 0)
		r = sort_duplicates(p, devs, n, usable, skip, notes);
	for (size_t i = 0; i < n && r == 0; i++) {
		ProbedDevice *d = &devs[i];
		Partition *part;
		bool known, dup = false, keep = false;
		struct stat st;

		if (!usable[i] || skip[i])
			continue;
		pthread_mutex_lock(&p->lock);
		part = find_uuid_locked(p, d->uuid);
		known = part != NULL;
		for (size_t k = 0; part && k < n_seen; k++)
			dup = dup || seen[k] == part;
		/* Already mounted from this very device: only the verification below. */
		keep = part && !dup && part->present && stat(d->device, &st) == 0 && st.st_rdev == part->dev;
		if (!part) {
			part = add_locked(p, d->uuid);
			if (!part)
				log_warning("more than %d partitions or out of memory; %s ignored", MAX_PARTITIONS,
					    d->device);
		}
		pthread_mutex_unlock(&p->lock);
		if (!part)
			continue;
		if (dup) {
			log_warning("device %s: duplicate XFS UUID %s (already using another device); left alone",
				    d->device, d->uuid);
			continue;
		}
		set_duplicates(p, part, d->device, notes[i]);
		r = push_partition(&seen, &n_seen, part);
		if (r < 0 || keep)
			continue;
		/* The trust rule: at start everything joins; later only what this run already knew. */
		if (attach(p, part, d, !p->scanned || known) == 0)
			r = push_partition(&attached, &n_attached, part);
		else {
			PartitionInfo info;
			partition_snapshot(p, part, &info);
			log_warning("partition UUID %s on %s refused: %s", d->uuid, d->device, info.problem);
		}
	}
	for (size_t i = 0; notes && i < n; i++)
		free(notes[i]);
	free(notes);
	free(skip);
	free(usable);
	probed_devices_free(devs, n);
	if (note_silent(p, stuck, n_stuck, &seen, &n_seen) < 0 && r == 0)
		r = -ENOMEM;
	probed_devices_free(stuck, n_stuck);

	/* Partitions that were present and are no longer detected. */
	for (size_t k = 0; k < pool_size(p); k++) {
		Partition *part = pool_get(p, k);
		PartitionFs *gone = NULL;
		bool was_seen = false;

		for (size_t s = 0; s < n_seen; s++)
			was_seen = was_seen || seen[s] == part;
		if (was_seen)
			continue;
		pthread_mutex_lock(&p->lock);
		if (part->present) {
			part->present = false;
			gone = TAKE_PTR(part->fs);
			set_problem_locked(part, "device %s is no longer detected", part->device);
			log_warning("partition UUID %s (%s) disappeared", part->uuid, part->device);
		}
		pthread_mutex_unlock(&p->lock);
		partition_fs_put(gone);
	}

	pthread_mutex_lock(&p->lock);
	p->last_scan_ms = now_mono_ms();
	p->devices_crc = crc;
	p->scanned = true;
	pthread_mutex_unlock(&p->lock);
	pthread_mutex_unlock(&p->scan_lock);
	if (r == 0 && ret_attached) {
		*ret_attached = TAKE_PTR(attached);
		*ret_n = n_attached;
	}
	return r;
}

int pool_check_held_elsewhere(Pool *p, char **reterr_msg)
{
	int r = 0;

	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->n && r == 0; i++) {
		const Partition *part = p->parts[i];
		char label[PARTITION_LABEL_MAX * 4];

		if (!part->held_elsewhere)
			continue;
		label_escape(part->label, label, sizeof(label));
		r = errmsg_set(reterr_msg, -EBUSY, "partition %s (%s, UUID %s) is %s", label, part->device, part->uuid,
			       part->problem);
	}
	pthread_mutex_unlock(&p->lock);
	return r;
}

bool pool_scan_is_stale(Pool *p, unsigned min_interval_ms)
{
	bool stale;

	pthread_mutex_lock(&p->lock);
	stale = !p->scanned || now_mono_ms() - p->last_scan_ms >= min_interval_ms;
	pthread_mutex_unlock(&p->lock);
	return stale;
}

int pool_adopt(Pool *p, Partition *part, char **reterr_msg)
{
	ProbedDevice d = { 0 };
	PartitionFs *fs;
	char device[256];
	int r;

	pthread_mutex_lock(&p->scan_lock);
	pthread_mutex_lock(&p->lock);
	if (part->present && part->adopted) {
		pthread_mutex_unlock(&p->lock);
		pthread_mutex_unlock(&p->scan_lock);
		return 0;
	}
	if (!part->present) {
		r = errmsg_set(reterr_msg, -ENODEV, "partition %s is not available: %s", part->uuid, part->problem);
		pthread_mutex_unlock(&p->lock);
		pthread_mutex_unlock(&p->scan_lock);
		return r;
	}
	snprintf(device, sizeof(device), "%s", part->device);
	fs = TAKE_PTR(part->fs);
	part->present = false;
	set_problem_locked(part, "being adopted");
	pthread_mutex_unlock(&p->lock);
	partition_fs_put(fs);

	/* Read-only to read-write is a new mount: XFS cannot turn on quota accounting on a remount. */
	r = unmount_path(part->mountpoint);
	if (r < 0)
		log_warning_errno(r, "partition %s: cannot unmount the read-only mount", part->uuid);
	r = probe_device_deadline(device, PROBE_DEADLINE_MS, &d);
	if (r < 0 || !d.uuid || !streq(d.uuid, part->uuid)) {
		r = errmsg_set(reterr_msg, r < 0 ? r : -ENXIO, "partition %s: %s no longer holds it", part->uuid, device);
		probed_device_done(&d);
		pthread_mutex_unlock(&p->scan_lock);
		return r;
	}
	pthread_mutex_lock(&p->lock);
	d.listed = part->device_info.listed;
	pthread_mutex_unlock(&p->lock);
	r = attach(p, part, &d, true);
	probed_device_done(&d);
	pthread_mutex_unlock(&p->scan_lock);
	if (r < 0) {
		PartitionInfo info;
		partition_snapshot(p, part, &info);
		return errmsg_set(reterr_msg, r, "partition %s could not be mounted read-write: %s", part->uuid,
				  info.problem);
	}
	log_info("partition %s adopted: it may now receive new volumes", part->uuid);
	return 0;
}
