/* SPDX-License-Identifier: MIT */
/* Volume create options (-o key=value): parsing, validation, canonical form. Pure code. */
#pragma once

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "device/device-policy.h"

#define VOLUME_NAME_MAX 128
#define OPTIONS_MAX_COUNT 32
#define OPTION_VALUE_MAX 256
#define PARTITION_REF_MAX 64 /* XFS labels are at most 12 bytes, UUIDs 36 */
#define NODE_NAME_MAX 64      /* a Linux host name (HOST_NAME_MAX) */

typedef enum SelftestPolicy {
	SELFTEST_POLICY_UNSET = 0, /* use the plugin-wide default */
	SELFTEST_POLICY_OFF,
	SELFTEST_POLICY_WARN,
	SELFTEST_POLICY_ENFORCE,
	_SELFTEST_POLICY_MAX,
	_SELFTEST_POLICY_INVALID = -EINVAL,
} SelftestPolicy;

const char *manager_selftest_to_string(SelftestPolicy p);
SelftestPolicy manager_selftest_from_string(const char *s);

/* Zero means "no threshold". */
typedef struct SelftestThresholds {
	/* Absolute figures. */
	double min_write_mbps;
	double min_read_mbps;
	double min_iops;
	double max_p99_ms;
	/* Relative to the partition's own baseline (see selftest-history.h). */
	double min_write_ratio; /* 0.01..1: sequential write at least this share of the baseline */
	double min_read_ratio;
	double min_iops_ratio;  /* the lower of the two IOPS ratios */
	double max_p99_ratio;   /* 1..1000: the higher of the two p99 ratios at most this multiple */
} SelftestThresholds;

#define SELFTEST_THRESHOLD_KEYS "min_write_mbps, min_read_mbps, min_iops, max_p99_ms, " \
	"min_write_ratio, min_read_ratio, min_iops_ratio, max_p99_ratio"

/*
 * Parses one threshold option (@key one of SELFTEST_THRESHOLD_KEYS) into @t.
 * -ENOENT (no message) when @key is not a threshold; -EINVAL and a message
 * naming the key and its range when @val is out of range or malformed.
 */
int selftest_threshold_parse(const char *key, const char *val, SelftestThresholds *t, char **reterr_msg);
/* Adds the thresholds set in @t to @obj as canonical strings ("0.7", "100"). */
void selftest_thresholds_to_json(const SelftestThresholds *t, json_t *obj);
/* Every threshold of @over that is set replaces the one in @base. */
void selftest_thresholds_merge(SelftestThresholds *base, const SelftestThresholds *over);

typedef struct VolumeOptions {
	char partition[PARTITION_REF_MAX + 1]; /* label or UUID; "" = most free space */
	char node[NODE_NAME_MAX + 1];          /* host name it may be created on, lower case; "" = any */
	bool has_uid, has_gid, has_mode;
	uint32_t uid, gid;
	mode_t mode;
	uint64_t size_bytes;  /* 0 = no limit */
	uint64_t inodes;      /* 0 = no limit */
	SelftestPolicy selftest;
	DevicePolicyMode health;  /* UNSET = NVMEVOL_HEALTH */
	SelftestThresholds thresholds;
	bool allow_suid;      /* suid=true: setuid bits honoured on the bind (default nosuid) */
	bool allow_devices;   /* dev=true: device nodes usable on the bind (default nodev) */
} VolumeOptions;

/*
 * What Create is asked to copy: from=SOURCE (a volume) and clone_copy=true
 * (copy the data where blocks cannot be shared). A request, not a property of
 * the volume: never part of VolumeOptions or of its canonical form.
 */
typedef struct CloneRequest {
	char from[VOLUME_NAME_MAX + 1]; /* "" = not a clone */
	bool copy;
} CloneRequest;

/* ^[A-Za-z0-9][A-Za-z0-9_.-]{1,127}$ */
bool volume_name_is_valid(const char *name);

/*
 * Parses Docker's Opts object (string values only). @opts may be NULL or an
 * empty object. On failure returns -EINVAL and a message naming the valid options.
 */
int volume_options_parse(const json_t *opts, VolumeOptions *ret, char **reterr_msg);
/* The same for Create, which also takes from= and clone_copy= (into @ret_clone). */
int volume_options_parse_create(const json_t *opts, VolumeOptions *ret, CloneRequest *ret_clone, char **reterr_msg);

/* Canonical string map: equal maps mean equal options ("mode":"0700", "size":"10G"). */
json_t *volume_options_to_json(const VolumeOptions *o);

/* Human list of differences, e.g. "mode: 0700 (existing) vs 0755 (requested)". NULL if equal. */
char *volume_options_diff(const VolumeOptions *existing, const VolumeOptions *requested);

/*
 * An admin change of an existing volume's options: @changes is an object of
 * string values whose keys are in @allowed (NULL-terminated; of size, inodes,
 * selftest, the thresholds, suid and dev). "none" clears a key (no limit, no
 * threshold, the plugin's default policy, false); any other value is checked
 * as at create.
 */
int volume_options_change(const VolumeOptions *cur, const json_t *changes, const char *const *allowed,
			  VolumeOptions *ret, char **reterr_msg);

/* "partition, uid, gid, mode, size, inodes, selftest, min_write_mbps, ..." */
const char *volume_options_valid_keys(void);
