/* SPDX-License-Identifier: MIT */
/*
 * A volume's snapshot: its record (JSON with a CRC, like a volume's record)
 * and what the daemon keeps of it in memory. The data is a block-sharing
 * copy of the volume's directory as of one instant (pool/snapstore.h says
 * where it lives on the partition).
 *
 * A record's state says where its operation stands, as a volume's index
 * entry does: "pending" from before the data directory is made until the
 * copy is complete (the commit is the write of "committed"), "removing"
 * from before its data goes until the record is deleted. Start-up undoes a
 * pending snapshot and finishes a removing one; a committed one is never
 * deleted by anything but snapshot-rm.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "volume/volume-options.h"

#define SNAPSHOT_RECORD_VERSION 1
#define SNAPSHOT_RECORD_SIZE_MAX 4096
/* Snapshots a volume may have: each one pins the blocks the volume has rewritten since. */
#define SNAPSHOTS_PER_VOLUME_MAX 64
#define SNAPSHOT_ID_LEN 32

typedef enum SnapshotState {
	SNAPSHOT_PENDING,
	SNAPSHOT_COMMITTED,
	SNAPSHOT_REMOVING,
	_SNAPSHOT_STATE_MAX,
	_SNAPSHOT_STATE_INVALID = -EINVAL,
} SnapshotState;

const char *snapshot_state_to_string(SnapshotState s);

typedef struct VolumeSnapshot {
	/* Persisted. */
	char name[VOLUME_NAME_MAX + 1];
	SnapshotState state;
	int64_t at;         /* unix seconds of the instant it shows */
	bool volume_in_use; /* the volume was known to be in use when it was taken */
	uint32_t frozen_ms; /* how long the partition's writers waited */
	uint64_t entries;   /* files, directories, links and special files */
	uint64_t bytes;     /* sizes of the regular files */
	bool temporary;     /* taken for an export: removed when it ends, or at the next start */
	bool evacuation;    /* taken by an evacuation, the base of its next pass; never moved with the volume */
	/*
	 * A random 128-bit ID (32 hex digits) drawn when it is taken, or the
	 * sender's when it came with `volume receive`: an incremental stream
	 * names its base by it. "" for a snapshot of an older nvmevol.
	 */
	char id[SNAPSHOT_ID_LEN + 1];
	/*
	 * Taken by `volume move` (or received from one): the base of its next
	 * pass, not a copy a user asked to keep, so a Remove of the volume takes
	 * it along. "by_move": true in the record; absent for the others.
	 */
	bool by_move;
	/*
	 * A receive's mark (manager-receive.c): the snapshot was taken of the
	 * received tree before its commit, whose directory's root has this inode
	 * number; the commit makes that directory volumes/<volume>. Until the
	 * mark is cleared the snapshot is not the volume's: never listed, used
	 * as a base, rolled back to or sent; start-up keeps it (clearing the
	 * mark) if volumes/<volume>'s root is that inode, else deletes it.
	 * "receive_root" in the record while set; absent for the others. 0: none.
	 */
	uint64_t receive_root;

	/* Runtime: the last measure of its cost (manager-snapshot.c). */
	bool data_missing;      /* committed, but its data directory is gone */
	bool cost_known;
	bool cost_complete;     /* false: the measure ran out of time; cost_bytes is a lower bound */
	uint64_t cost_bytes;    /* bytes of its data that the volume no longer shares */
	int64_t cost_at;        /* unix seconds of that measure */
} VolumeSnapshot;

/* The record of snapshot @s of volume @volume, with its "crc" trailer (malloc'd), or NULL on OOM. */
char *snapshot_record_dump(const char *volume, const VolumeSnapshot *s);
/* Whether @id is SNAPSHOT_ID_LEN lower-case hex digits. */
bool snapshot_id_is_valid(const char *id);
/* Parses a record; checks version, CRC, that it belongs to @volume, every field. -EUCLEAN when damaged. */
int snapshot_record_parse(const char *buf, size_t len, const char *volume, VolumeSnapshot *ret, char **reterr_msg);
