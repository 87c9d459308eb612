/* SPDX-License-Identifier: MIT */
/*
 * The partition pool: XFS filesystems found by probe, mounted by nvmevol
 * (noatime,nodiratime,nosuid,nodev, private) under the partition root,
 * verified against mountinfo, and laid out as
 * <fs>/nvmevol/{volumes,meta,trash,selftest,quarantine,snapshots,imports}.
 *
 * Trust rule: partitions found by the first scan (at start) join the pool.
 * One that appears later joins too if this run already knew its UUID (it
 * went away and came back, or this host's index names it); any other is
 * mounted read-only and gets no new volumes until pool_adopt().
 *
 * Locking rule, for every Partition:
 *  - uuid and mountpoint never change; the Partition is freed only with the pool.
 *  - every other field is guarded by the pool's mutex: read it with
 *    partition_snapshot() (or pool_lock()/pool_unlock() around a short read).
 *  - the open directories live in a PartitionFs with a reference count:
 *    partition_fs_get() gives a reference (NULL while the partition is not
 *    present), partition_fs_put() drops it. A re-attach installs a new
 *    PartitionFs; the old one's fds are closed only when its last user is
 *    done, so an fd is never closed (and its number reused) under a user.
 *  - selftest_lock serialises self-tests of the partition; selftest_cache is
 *    owned by manager-selftest.c: created once and published with a release
 *    store, it carries its own mutex for the cached result and the history
 *    (so Get and the metrics never wait for a running self-test); health_lock
 *    and health_cache belong to manager-health.c and are guarded by health_lock,
 *    which is never held across an NVMe admin command.
 *  - scans are serialised by their own mutex; the pool mutex is never held
 *    across a mount or any other slow call, and is the innermost lock of the
 *    program (take nothing else while holding it).
 *
 * Duplicate rule: of devices holding one XFS UUID (a dd copy of a disk), the
 * one the partition is mounted from (else last used: device number, then
 * serial; else mounted at its mount point; else the first found) is used; the
 * others are never mounted, and are named in the partition's duplicates.
 *
 * Device rule (device-policy.h): before a partition is mounted, the facts of
 * its block device are read from sysfs. A removable or USB device is refused
 * unless NVMEVOL_DEVICES names it, and NVMEVOL_REQUIRE_NVME=enforce refuses a
 * device that is not NVMe or is rotational; refused partitions are never
 * mounted, and their problem says why and how to allow them.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "settings.h"
#include "device/device-policy.h"
#include "device/device.h"
#include "device/xfs-geometry.h"
#include "pool/cordon.h"

#define PARTITION_MOUNT_OPTIONS "noatime,nodiratime,nosuid,nodev"
#define PARTITION_LABEL_MAX 64  /* raw bytes; XFS labels are at most 12 */
#define PARTITION_PROBLEM_MAX 512
#define PARTITION_DUPLICATES_MAX 512

typedef struct PartitionFs {
	int root_fd;       /* the mounted root, O_DIRECTORY */
	int tree_fd;       /* nvmevol/ */
	int volumes_fd;    /* nvmevol/volumes: one served directory per volume */
	int meta_fd;       /* nvmevol/meta: one record per volume */
	int trash_fd;      /* nvmevol/trash: removed volumes being deleted */
	int scratch_fd;    /* nvmevol/selftest: self-test scratch area */
	int quarantine_fd; /* nvmevol/quarantine: orphans kept for the admin */
	int snapshots_fd;  /* nvmevol/snapshots: the volumes' snapshots (snapstore.h) */
	int imports_fd;    /* nvmevol/imports: imports being written (never committed: start-up deletes them) */
	int serving_fd;    /* holds the partition's serving lock (serving.h) while this mount is in use */
	dev_t dev;
	bool read_only;    /* mounted ro: not adopted yet */
	bool quota;        /* project quota enforced on this filesystem */
	unsigned refs;     /* atomic */
} PartitionFs;

/* What is known about the device under a partition: read at each attach. */
typedef struct PartitionDevice {
	bool has_facts;
	DeviceFacts facts;
	char facts_error[256];  /* why has_facts is false */
	bool has_xfs;
	XfsGeometry xfs;        /* from the mounted filesystem */
	bool listed;            /* named in NVMEVOL_DEVICES */
} PartitionDevice;

/* Placement order among adopted partitions: healthy first; REFUSED ones get no new volumes. */
typedef enum PartitionHealthRank {
	PARTITION_HEALTH_UNKNOWN_OR_OK,
	PARTITION_HEALTH_WARNING,
	PARTITION_HEALTH_CRITICAL,
	PARTITION_HEALTH_REFUSED,
} PartitionHealthRank;

typedef struct Partition {
	char uuid[64];
	char *mountpoint; /* <partition_root>/<uuid> */

	/* Guarded by the pool mutex. */
	char label[PARTITION_LABEL_MAX];
	char device[256];
	bool present;  /* mounted, verified and laid out */
	bool adopted;  /* may receive new volumes (see the trust rule) */
	char problem[PARTITION_PROBLEM_MAX]; /* why it is not present, or "" */
	bool held_elsewhere; /* not present because another nvmevol holds its serving lock (problem says who) */
	dev_t dev;
	unsigned logical_sector_size;
	char verified_options[256]; /* vfs options read back from mountinfo */
	uint64_t verified_at_ms;    /* CLOCK_MONOTONIC of the last verification */
	PartitionFs *fs;            /* while present */
	PartitionDevice device_info;
	PartitionHealthRank health_rank;
	char duplicates[PARTITION_DUPLICATES_MAX]; /* other devices with this UUID, left alone ("" if none) */
	PartitionCordon cordon; /* read from the partition at each attach (cordon.h); no new volumes while on */

	pthread_mutex_t selftest_lock;
	struct SelftestState *selftest_cache; /* manager-selftest.c's; the pool only frees it */
	pthread_mutex_t health_lock;
	struct HealthCache *health_cache;     /* manager-health.c's; the pool only frees it */
} Partition;

/* A consistent copy of a partition's fields, for Status, errors and decisions. */
typedef struct PartitionInfo {
	char uuid[64];
	char label[PARTITION_LABEL_MAX];
	char device[256];
	bool present, adopted, read_only, quota;
	char problem[PARTITION_PROBLEM_MAX];
	char verified_options[256];
	char duplicates[PARTITION_DUPLICATES_MAX];
	dev_t dev;
	unsigned logical_sector_size;
	PartitionCordon cordon;
} PartitionInfo;

typedef struct Pool Pool;

/* A block device whose probe did not answer in time (probe-deadline.h): skipped by scans until it does. */
typedef struct PoolSilentDevice {
	char device[160];
	int64_t since;           /* unix seconds: the first scan it did not answer */
	char partition_uuid[64]; /* the present partition it holds, or "" */
} PoolSilentDevice;

int pool_new(const Settings *cfg, Pool **ret);
Pool *pool_free(Pool *p);
/*
 * The directory of the freeze markers (store_freeze_dir()), before the first
 * scan: an attach thaws a partition only where a marker says nvmevol froze it
 * (freeze.h). Without one nothing is ever thawed at attach.
 */
void pool_set_freeze_dir(Pool *p, int dir_fd);

/*
 * Discovers partitions, mounts the new ones, re-verifies the known ones and
 * marks vanished ones absent. If @ret_attached is not NULL it receives the
 * partitions this scan attached (malloc'd array, *ret_n entries) so that the
 * caller can load their volumes. Safe to call from any thread.
 */
int pool_scan(Pool *p, Partition ***ret_attached, size_t *ret_n);
/* True if no scan ran in the last @min_interval_ms (the caller then scans). */
/*
 * -EBUSY and an Err naming the first partition that another nvmevol serves
 * (Partition.held_elsewhere) and who that is; 0 if none. After the first
 * scan: an instance refuses to start rather than serve half a pool.
 */
int pool_check_held_elsewhere(Pool *p, char **reterr_msg);
bool pool_scan_is_stale(Pool *p, unsigned min_interval_ms);
/*
 * True if the kernel's block devices (/proc/partitions, each disk's diskseq)
 * changed since the last scan, or a probe that did not answer has finished
 * since: a cheap check that never reads a device.
 */
bool pool_devices_changed(Pool *p);
/* The devices the last scan skipped because they did not answer (malloc'd copy, the count returned). */
size_t pool_silent_devices(Pool *p, PoolSilentDevice **ret);

size_t pool_size(Pool *p);
Partition *pool_get(Pool *p, size_t i);
/* By UUID, present or not. */
Partition *pool_find_uuid(Pool *p, const char *uuid);
/* A partition whose label or UUID is @ref; with @present_only, only present ones. */
Partition *pool_find_ref(Pool *p, const char *ref, bool present_only);
/*
 * The partition with @uuid, created as "not detected" if the pool has never
 * seen it (a volume in this host's index lives there). Never NULL but on ENOMEM.
 */
Partition *pool_add_known(Pool *p, const char *uuid, const char *label);
/*
 * The adopted, present partition for a new volume: healthy NVMe first, then
 * healthy other disks, then NVMe with a health warning, then critical ones
 * (never a REFUSED or cordoned one); the most free space within each. NULL if none.
 */
Partition *pool_pick_most_free(Pool *p);
/* "label (uuid), ..." of present partitions, for error messages. */
char *pool_describe(Pool *p);

/*
 * Lets a read-only (not adopted) partition receive volumes: unmounts it and
 * mounts it again read-write. The caller makes sure none of its volumes is
 * mounted.
 */
int pool_adopt(Pool *p, Partition *part, char **reterr_msg);

void partition_snapshot(Pool *p, Partition *part, PartitionInfo *ret);
/* A copy of the device facts and XFS geometry recorded at the last attach. */
void partition_device_snapshot(Pool *p, Partition *part, PartitionDevice *ret);
void partition_set_health_rank(Pool *p, Partition *part, PartitionHealthRank rank);
/* Publishes @c as @part's cordon (the caller wrote it to the partition first: cordon_write()). */
void partition_set_cordon(Pool *p, Partition *part, const PartitionCordon *c);
/* The label, escaped for text (pool.h's labels are raw bytes), or the UUID of an unlabelled partition. */
void partition_display_name(const PartitionInfo *info, char *buf, size_t len);
#define PARTITION_NAME_MAX (PARTITION_LABEL_MAX * 4)
PartitionFs *partition_fs_get(Pool *p, Partition *part);
void partition_fs_put(PartitionFs *fs);

/* Re-reads mountinfo for @part: false (and marks it absent) if its mount vanished or changed. */
bool partition_verify(Pool *p, Partition *part);
/* partition_verify() at most once per @max_age_ms; the last answer in between. */
bool partition_verify_recent(Pool *p, Partition *part, unsigned max_age_ms);
/*
 * Opens the directory @name of @parent (made with @mode first if @create;
 * *@created set if it was made), never through a symlink, and only on device
 * @dev (-EXDEV otherwise).
 */
int pool_open_subdir(int parent, const char *name, mode_t mode, dev_t dev, bool create, bool *created);
int partition_fs_free_bytes(const PartitionFs *fs, uint64_t *ret_free, uint64_t *ret_total);
