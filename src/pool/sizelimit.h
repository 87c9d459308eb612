/* SPDX-License-Identifier: MIT */
/*
 * Size limits of volumes (size=, inodes=): one XFS project ID per volume
 * directory, inherited by everything created below it, with hard limits.
 * Policy over quota.c (the kernel interface). Project IDs are allocated per
 * partition, lowest free first, through the one allocator (projid.h): an ID
 * is free once no live volume or shadowed record carries it, no top
 * directory of volumes/, trash/ or quarantine/ carries it on disk, and no
 * Create or resize holds it reserved. A removed volume's limit stays on its
 * free ID (clearing it after the delete could race with a new volume); the
 * reservation clears it, so every new holder starts with no limits.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "volume/volume-options.h"
#include "pool/pool.h"
#include "pool/projid.h"
#include "volume/registry.h"
#include "volume/volume.h"

bool sizelimit_wanted(const VolumeOptions *o);
/* -EOPNOTSUPP with advice when @o asks for limits that @fs cannot enforce. */
int sizelimit_check_create(PartitionFs *fs, const char *partition_name, const VolumeOptions *o, char **reterr_msg);
/*
 * Reserves @v's project ID on its partition and applies it and the limits to
 * @dirfd (the new directory). The caller commits v->projid once @v is
 * registered, or releases it (sizelimit_release) when the create fails.
 */
int sizelimit_apply_new(ProjidAlloc *ids, Registry *reg, PartitionFs *fs, Volume *v, int dirfd, char **reterr_msg);
/* Clears the limits of the reserved @projid that a failed operation had set, then releases it (0: no-op). */
void sizelimit_release(ProjidAlloc *ids, Partition *part, PartitionFs *fs, uint32_t projid);
/* The "quota" object of Status: ID, limits, usage from quota accounting. NULL when the volume has none. */
json_t *sizelimit_status(PartitionFs *fs, const VolumeOptions *o, uint32_t projid);
/*
 * Reserves the lowest project ID free on @part (@fs: its mounted
 * filesystem), with its limits cleared, to be committed once the registry
 * carries it (sizelimit_commit_id) or released (sizelimit_release). -ENOSPC
 * when none is left; -ENOMEM, a directory's read error, or the quotactl's.
 * Takes the registry's read lock.
 */
int sizelimit_reserve_id(ProjidAlloc *ids, Registry *reg, Partition *part, PartitionFs *fs, uint32_t *ret_id);
void sizelimit_commit_id(ProjidAlloc *ids, Partition *part, uint32_t projid);
/*
 * Admin resize of a volume that had no project ID: gives the directory @dirfd
 * and every directory and regular file below it project @projid (pre-order,
 * never following a symlink or crossing a mount), so that its usage is
 * counted. Files moved in from elsewhere during the walk may stay uncounted.
 */
int sizelimit_tag_tree(PartitionFs *fs, int dirfd, uint32_t projid, uint64_t *ret_tagged, char **reterr_msg);
/* Bytes and inodes charged to @projid (quota accounting: no walk). */
int sizelimit_usage(PartitionFs *fs, uint32_t projid, uint64_t *ret_bytes, uint64_t *ret_inodes);
/* Sets the hard limits of @projid (0 = none). */
int sizelimit_set(PartitionFs *fs, uint32_t projid, uint64_t bytes, uint64_t inodes, char **reterr_msg);

/* Start-up: gives a volume with limits its ID and limits again if they went missing. */
int sizelimit_repair(ProjidAlloc *ids, Registry *reg, PartitionFs *fs, Volume *v, bool *ret_changed);
