/* SPDX-License-Identifier: MIT */
/* A volume: its record (persisted as JSON with a CRC) and its per-mount-ID counts. */
#pragma once

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "volume/snapshot.h"
#include "volume/volume-options.h"
#include "util/time-util.h"

#define MOUNT_ID_MAX 128
#define MOUNT_IDS_MAX 4096
/* The one count a volume gets when its counts file cannot be read at start: "in use" until proven otherwise. */
#define MOUNT_ID_UNREADABLE "counts-unreadable-at-start"
#define RECORD_VERSION 1
#define RECORD_SIZE_MAX (256 * 1024)

/* Records are always written "ready"; "removing" is only read, from records of nvmevol 0.1. */
typedef enum VolumeState {
	VOLUME_READY,
	VOLUME_REMOVING,
	_VOLUME_STATE_MAX,
	_VOLUME_STATE_INVALID = -EINVAL,
} VolumeState;

const char *volume_state_to_string(VolumeState s);
VolumeState volume_state_from_string(const char *s);

/*
 * Where an index entry's operation stands: what start-up may undo when the
 * record is missing. Only "pending" (a Create before its record) and
 * "removing" (a Remove that may have deleted its record) are written, as the
 * optional member "index_state"; an entry without it (every committed one,
 * and all of older versions) is committed, and its directory is never deleted.
 */
typedef enum VolumeIndexState {
	VOLUME_INDEX_COMMITTED,
	VOLUME_INDEX_PENDING,
	VOLUME_INDEX_REMOVING,
	_VOLUME_INDEX_STATE_MAX,
	_VOLUME_INDEX_STATE_INVALID = -EINVAL,
} VolumeIndexState;

typedef struct MountRef {
	char *id;
	unsigned count;
} MountRef;

typedef struct Partition Partition;

/* Where a clone came from (Create with from=SOURCE); persisted in its record. */
typedef struct VolumeClone {
	char from[VOLUME_NAME_MAX + 1];
	int64_t at;         /* unix seconds of the instant the clone shows */
	bool source_in_use; /* SOURCE was mounted: made consistent under a freeze of the partition */
	bool copied;        /* the data was copied (clone_copy=true), not shared */
	uint32_t frozen_ms; /* writes on the partition waited this long (0 when not in use) */
	uint32_t writeback_wait_ms; /* the clone waited this long for XFS's writeback before its freeze (clone.h) */
	uint64_t entries;   /* files, directories, links and special files */
	uint64_t bytes;     /* sizes of the regular files */
} VolumeClone;

/*
 * Where a fenced volume went (a move's end, volume fence): persisted in its
 * record as "moved_to". A Mount of a fenced volume is refused.
 */
#define VOLUME_FENCE_HOST_MAX 253
typedef struct VolumeFence {
	char host[VOLUME_FENCE_HOST_MAX + 1]; /* printable, no spaces */
	int64_t at;                           /* unix seconds */
	uint64_t generation;                  /* 1 for the first fence of this volume, +1 each time */
} VolumeFence;

/*
 * Locking rule, once a volume is in the registry: name and part never change;
 * every other field is written only by a thread that holds both the volume's
 * op_lock and the registry's write lock, so holding either one is enough to
 * read it. op_lock serialises the slow operations on one volume (mount,
 * self-test, unmount, remove, admin changes); the registry lock is only held
 * for memory work. refs is atomic.
 */
typedef struct Volume {
	/* Persisted. */
	VolumeState state;
	VolumeIndexState index_state; /* as parsed from an index entry; records carry none */
	const VolumeOptions *opts; /* shared and immutable (options-intern.h): change with volume_set_options() */
	char partition_uuid[40];  /* 36 characters */
	char partition_label[16]; /* raw bytes: XFS labels are at most 12; records hold them escaped */
	int64_t created_at; /* unix seconds */
	uint32_t projid;    /* XFS project ID, 0 = none */
	uint32_t n_mounts;  /* at most MOUNT_IDS_MAX */
	VolumeClone *clone; /* NULL unless the volume was created as a clone */
	VolumeFence *fence; /* NULL unless fenced */
	uint64_t fence_generation; /* the last fence's generation (kept after unfence: "fence_generation") */
	/*
	 * An evacuation in progress (manager-evacuate.c): the UUID of the partition
	 * the volume is being copied to, in the record of its source until the switch.
	 */
	char *evacuating_to; /* the target partition's UUID while an evacuation moves it, else NULL */
	MountRef *mounts;

	/* Runtime. */
	Partition *part;    /* where the record is (or, index only, where it should be); never NULL when registered */
	char *corrupt;      /* why the record could not be loaded, NULL if fine */
	char *bind_options; /* verified vfs options of the bind, while mounted */
	json_t *selftest;   /* last self-test report for Status, or NULL */
	/*
	 * Its snapshots (loaded from its partition; snapstore.h), sorted by name.
	 * Not in the record. Their cost_* fields are a cache, written under the
	 * registry's write lock alone (read them under the registry lock).
	 */
	VolumeSnapshot *snaps;
	uint32_t n_snaps;   /* at most SNAPSHOTS_PER_VOLUME_MAX */
	unsigned refs;      /* atomic; never shares a word with the flags below */
	pthread_mutex_t op_lock;
	/* One bit each: written under the locking rule above like every other field. */
	bool index_only : 1; /* known from this host's index only: its partition has not shown its record */
	bool mounted : 1;
	bool removed : 1;
	bool replaced : 1;   /* removed because the registry holds its successor (evacuated): look the name up again */
	bool indexed : 1;    /* start-up: an index entry exists in the state directory */
	/*
	 * Its record allows suid or dev, but this host never granted that (no
	 * index entry of this host for it on this partition says so: a disk from
	 * elsewhere, or a lost state directory). Bound nosuid,nodev until an admin
	 * sets suid/dev again with 'volume set'; its index entry records only the
	 * grants this host made.
	 */
	bool grants_unconfirmed : 1;

	char name[]; /* last: allocated to its length (10,000 volumes, mostly short names) */
} Volume;

/* A volume with the default options; NULL when out of memory. */
Volume *volume_new(const char *name);
/* Points @v at the shared copy of @o; -ENOMEM leaves @v as it was. */
int volume_set_options(Volume *v, const VolumeOptions *o);
Volume *volume_ref(Volume *v);
Volume *volume_unref(Volume *v);

unsigned volume_mount_total(const Volume *v);
/* Adds one to @id's count. */
int volume_mount_add(Volume *v, const char *id);
/* Subtracts one from @id's count; returns 1 if it was counted, 0 if unknown. */
int volume_mount_drop(Volume *v, const char *id);
void volume_mounts_clear(Volume *v);

bool mount_id_is_valid(const char *id);

/*
 * The record as a string: canonical JSON with a last "crc" member over the
 * bytes before it; @with_mounts=false gives the record and index form (no counts).
 */
char *volume_record_dump(const Volume *v, bool with_mounts);
/*
 * The index entry form: the record form with only the suid/dev grants this
 * host made (see grants_unconfirmed), and @state unless it is committed.
 */
char *volume_index_dump(const Volume *v, VolumeIndexState state);

/* Whether every suid/dev grant of @rec is also in @granted (this host's index entry). Pure. */
bool volume_grants_confirmed(const VolumeOptions *rec, const VolumeOptions *granted);

/* Parses a record or index file; checks version, CRC, name and every field (index_state included). */
int volume_record_parse(const char *buf, size_t len, Volume **ret, char **reterr_msg);

