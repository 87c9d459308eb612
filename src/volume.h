/* SPDX-License-Identifier: MIT */
/* A volume: its record (persisted as JSON with a CRC) and its per-mount-ID counts. */
#pragma once

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "options.h"

#define MOUNT_ID_MAX 128
#define MOUNT_IDS_MAX 4096
#define RECORD_VERSION 1
#define RECORD_SIZE_MAX (256 * 1024)

typedef enum VolumeState {
	VOLUME_CREATING,
	VOLUME_READY,
	VOLUME_REMOVING,
	_VOLUME_STATE_MAX,
	_VOLUME_STATE_INVALID = -EINVAL,
} VolumeState;

const char *volume_state_to_string(VolumeState s);
VolumeState volume_state_from_string(const char *s);

typedef struct MountRef {
	char *id;
	unsigned count;
} MountRef;

typedef struct Partition Partition;

typedef struct Volume {
	/* Persisted. */
	VolumeState state;
	VolumeOptions opts;
	char partition_uuid[40];  /* 36 characters */
	char partition_label[16]; /* XFS labels are at most 12 bytes */
	int64_t created_at; /* unix seconds */
	uint32_t projid;    /* XFS project ID, 0 = none */
	MountRef *mounts;
	size_t n_mounts;

	/* Runtime. */
	Partition *part;    /* NULL while the partition is missing */
	char *corrupt;      /* why the record could not be loaded, NULL if fine */
	bool mounted;
	char *bind_options; /* verified vfs options of the bind, while mounted */
	json_t *selftest;   /* last self-test report for Status, or NULL */
	bool removed;
	bool indexed;       /* start-up: an index entry exists in the state directory */
	unsigned refs;
	pthread_mutex_t op_lock; /* serialises Mount/Unmount/Remove of this volume */

	char name[]; /* last: allocated to its length (10,000 volumes, mostly short names) */
} Volume;

Volume *volume_new(const char *name);
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
 * The record as JSON; @with_mounts=false gives the index form (no counts).
 * A "crc" member covers the canonical encoding of everything else.
 */
json_t *volume_record_to_json(const Volume *v, bool with_mounts);
char *volume_record_dump(const Volume *v, bool with_mounts);

/* Parses a record or index file; checks version, CRC, name and every field. */
int volume_record_parse(const char *buf, size_t len, Volume **ret, char **reterr_msg);

/* RFC 3339, UTC: "2026-11-29T20:15:02Z". */
void format_rfc3339(int64_t t, char *buf, size_t len);
