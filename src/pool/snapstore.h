/* SPDX-License-Identifier: MIT */
/*
 * Where snapshots live on a partition, and the only code that writes their
 * records:
 *   nvmevol/snapshots/<volume>/meta/<snapshot>.json   the record (snapshot.h)
 *   nvmevol/snapshots/<volume>/data/<snapshot>/       the data: a reflink copy
 *   nvmevol/snapshots/<volume>/rollback/              a rollback's other state
 * Outside nvmevol/volumes/, so nothing there is ever listed to Docker or
 * bound into a container; nvmevol/snapshots is 0700 root. Every record
 * write is atomic (temp file, fsync, rename, fsync of the directory).
 * The caller holds the volume's op_lock.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "pool/pool.h"
#include "volume/snapshot.h"

#define SNAPSTORE_ROLLBACK "rollback"

typedef struct SnapDir {
	int vol_fd;  /* snapshots/<volume> */
	int meta_fd; /* .../meta */
	int data_fd; /* .../data */
} SnapDir;

#define SNAPDIR_NULL ((SnapDir){ .vol_fd = -EBADF, .meta_fd = -EBADF, .data_fd = -EBADF })

/* Opens snapshots/@volume and its two halves (made, and synced, if @create). -ENOENT: none, and !@create. */
int snapstore_open(PartitionFs *fs, const char *volume, bool create, SnapDir *ret);
/*
 * The names in nvmevol/snapshots (the volumes that have a snapshot directory),
 * sorted (names_free()); none when the partition has no such directory.
 * Start-up lists them once instead of opening a directory per volume.
 */
int snapstore_volume_names(PartitionFs *fs, char ***ret_names, size_t *ret_n);
void snapdir_done(SnapDir *d);

int snapstore_save(SnapDir *d, const char *volume, const VolumeSnapshot *s);
int snapstore_delete(SnapDir *d, const char *name);

/*
 * Every record of @volume (malloc'd array, sorted by name; *ret_n may be 0),
 * with data_missing set where a committed one has no data directory. A
 * record that cannot be parsed calls @damaged (its data is kept, the record
 * is not returned); @damaged may be NULL.
 */
typedef void (*SnapstoreDamagedFn)(const char *file, const char *why, void *userdata);
int snapstore_load(SnapDir *d, const char *volume, SnapstoreDamagedFn damaged, void *userdata, VolumeSnapshot **ret,
		   size_t *ret_n);

/* Calls @cb for each entry of data/ that no record of @snaps accounts for. */
int snapstore_foreach_orphan(SnapDir *d, const VolumeSnapshot *snaps, size_t n,
			     int (*cb)(const char *name, void *userdata), void *userdata);

/* Removes meta/, data/ and snapshots/@volume when they are empty (after the last snapshot went); else a no-op. */
void snapstore_prune(PartitionFs *fs, const char *volume);
