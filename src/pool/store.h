/* SPDX-License-Identifier: MIT */
/*
 * Persistent state, and the only code that writes it:
 *  - records: <partition>/nvmevol/meta/<name>.json, next to the data (the
 *    authority on what a volume is; a disk carries its volumes with it);
 *  - the index: <state>/index/<name>.json, so that Get still answers for a
 *    volume whose partition is missing (Docker forgets a volume Get denies);
 *  - mount counts: <state>/mounts/<name>.json while a volume is mounted
 *    (host state; kept off the partition so a full disk still mounts);
 *  - freeze markers: <state>/freeze/<partition UUID> while nvmevol holds that
 *    partition frozen (written and removed by freeze.c, not atomic-fsynced:
 *    freeze.h says why).
 * Every write is atomic (temp file, fsync, rename, fsync of the directory),
 * and every read, write and delete is tried once more after an error.
 * The caller holds the volume's op_lock (or owns a volume not yet registered),
 * which keeps the fields being written stable (volume.h).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "pool/pool.h"
#include "volume/volume.h"

typedef struct Store Store;

/* mkdir -p of @state_dir, the instance lock (-EBUSY if another nvmevol holds it), index/, mounts/ and freeze/. */
int store_open(const char *state_dir, Store **ret, char **reterr_msg);
Store *store_free(Store *s);
const char *store_path(Store *s);
/* <state>/freeze, open for the store's lifetime: the FreezeMarker directory. */
int store_freeze_dir(Store *s);

int store_save_record(PartitionFs *fs, const Volume *v);
bool store_has_record(PartitionFs *fs, const char *name);
/* The record's bytes as they are (also an unreadable one), to put them back if a Remove fails. */
int store_read_record(PartitionFs *fs, const char *name, char **ret, size_t *ret_len);
int store_restore_record(PartitionFs *fs, const char *name, const char *buf, size_t len);
int store_delete_record(PartitionFs *fs, const char *name);

/*
 * @state says where @v's Create or Remove stands (volume.h): Create writes
 * "pending" before the directory and "committed" after the record, Remove
 * writes "removing" before it deletes the record. Start-up rolls back only
 * what a pending or removing entry accounts for.
 */
int store_save_index(Store *s, const Volume *v, VolumeIndexState state);
/* The entry's bytes as they are, to put them back if an operation fails (-ENOENT if there is none). */
int store_read_index_bytes(Store *s, const char *name, char **ret, size_t *ret_len);
int store_restore_index(Store *s, const char *name, const char *buf, size_t len);
int store_delete_index(Store *s, const char *name);
bool store_has_index(Store *s, const char *name);
/* The index entry of @name, parsed (index_state included); -ENOENT if there is none. */
int store_read_index(Store *s, const char *name, Volume **ret);

/* Writes @v's per-ID counts, or deletes the file when the total is zero. */
int store_save_mounts(Store *s, const Volume *v);
int store_delete_mounts(Store *s, const char *name);

/*
 * Start-up loading. Calls @cb for every "<valid name>.json" of the directory
 * that @want (if set) accepts, with the parsed volume (NULL and a reason if
 * unreadable). Parsing, the bulk of start-up with 10,000 volumes, runs on
 * several threads; @cb runs on the caller's thread, in directory order.
 */
typedef bool (*StoreWantFn)(const char *name, void *userdata);
typedef int (*StoreLoadFn)(const char *name, Volume *v, const char *err, void *userdata);
int store_load_records(PartitionFs *fs, StoreWantFn want, StoreLoadFn cb, void *userdata);
int store_load_index(Store *s, StoreWantFn want, StoreLoadFn cb, void *userdata);
/*
 * Only the index entries that carry an index_state (pending, removing, or one
 * this version does not know): a committed entry, written without one, is read
 * but neither parsed nor passed to @cb. Start-up's settling of entries needs
 * no more, and a parse per volume less.
 */
int store_load_index_unsettled(Store *s, StoreWantFn want, StoreLoadFn cb, void *userdata);
int store_load_mounts(Store *s, StoreLoadFn cb, void *userdata);
