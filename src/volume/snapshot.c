/* SPDX-License-Identifier: MIT */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "volume/snapshot.h"
#include "util/alloc-util.h"
#include "util/errmsg.h"
#include "util/macro.h"
#include "util/strutil.h"

static const char *const state_names[_SNAPSHOT_STATE_MAX] = {
	[SNAPSHOT_PENDING] = "pending",
	[SNAPSHOT_COMMITTED] = "committed",
	[SNAPSHOT_REMOVING] = "removing",
};

const char *snapshot_state_to_string(SnapshotState s)
{
	return s >= 0 && s < _SNAPSHOT_STATE_MAX ? state_names[s] : NULL;
}

static SnapshotState state_from_string(const char *s)
{
	for (int i = 0; s && i < _SNAPSHOT_STATE_MAX; i++)
		if (streq(s, state_names[i]))
			return (SnapshotState)i;
	return _SNAPSHOT_STATE_INVALID;
}

char *snapshot_record_dump(const char *volume, const VolumeSnapshot *s)
{
	_cleanup_free_ char *body = NULL;
	json_t *j;

	j = json_pack("{s:i,s:s,s:s,s:s,s:I,s:b,s:I,s:I,s:I,s:b}", "version", SNAPSHOT_RECORD_VERSION, "volume", volume,
		      "name", s->name, "state", snapshot_state_to_string(s->state), "at", (json_int_t)s->at,
		      "volume_in_use", s->volume_in_use, "frozen_ms", (json_int_t)s->frozen_ms, "entries",
		      (json_int_t)s->entries, "bytes", (json_int_t)s->bytes, "temporary", s->temporary);
	if (!j)
		return NULL;
	if ((s->id[0] && json_object_set_new(j, "id", json_string(s->id)) < 0) ||
	    (s->by_move && json_object_set_new(j, "by_move", json_true()) < 0) ||
	    (s->evacuation && json_object_set_new(j, "evacuation", json_true()) < 0) ||
	    (s->receive_root && json_object_set_new(j, "receive_root", json_integer((json_int_t)s->receive_root)) < 0)) {
		json_decref(j);
		return NULL;
	}
	body = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(j);
	return body ? crc_trailer_append(body) : NULL;
}

bool snapshot_id_is_valid(const char *id)
{
	if (!id || strlen(id) != SNAPSHOT_ID_LEN)
		return false;
	for (size_t i = 0; i < SNAPSHOT_ID_LEN; i++)
		if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
			return false;
	return true;
}

static int get_u64(json_t *j, const char *key, uint64_t max, uint64_t *ret)
{
	json_t *x = json_object_get(j, key);

	if (!json_is_integer(x) || json_integer_value(x) < 0 || (uint64_t)json_integer_value(x) > max)
		return -EUCLEAN;
	*ret = (uint64_t)json_integer_value(x);
	return 0;
}

int snapshot_record_parse(const char *buf, size_t len, const char *volume, VolumeSnapshot *ret, char **reterr_msg)
{
	VolumeSnapshot s = { 0 };
	json_error_t jerr;
	json_t *j, *x;
	uint64_t u = 0;
	int r = -EUCLEAN;

	if (len > SNAPSHOT_RECORD_SIZE_MAX)
		return errmsg_set(reterr_msg, -EUCLEAN, "record larger than %d bytes", SNAPSHOT_RECORD_SIZE_MAX);
	j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!j)
		return errmsg_set(reterr_msg, -EUCLEAN, "not valid JSON: %s", jerr.text);
	/*
	 * "id" since send/receive: a record without one is an older nvmevol's. "by_move" (always
	 * true) only on a move's snapshot, "evacuation" (always true) only on an evacuation's,
	 * "receive_root" (an inode number) only on a receive's before its commit settled.
	 */
	x = json_object_get(j, "id");
	if (!json_is_object(j) ||
	    json_object_size(j) != 11u + (x ? 1u : 0u) + (json_object_get(j, "by_move") ? 1u : 0u) +
					   (json_object_get(j, "evacuation") ? 1u : 0u) +
					   (json_object_get(j, "receive_root") ? 1u : 0u) ||
	    (x && !(json_is_string(x) && snapshot_id_is_valid(json_string_value(x)))) ||
	    (json_object_get(j, "by_move") && !json_is_true(json_object_get(j, "by_move"))) ||
	    (json_object_get(j, "evacuation") && !json_is_true(json_object_get(j, "evacuation")))) {
		errmsg_set(reterr_msg, r, "not a snapshot record");
		goto out;
	}
	x = json_object_get(j, "version");
	if (!json_is_integer(x) || json_integer_value(x) != SNAPSHOT_RECORD_VERSION) {
		errmsg_set(reterr_msg, r, "unsupported record version");
		goto out;
	}
	if (!json_is_integer(json_object_get(j, "crc")) || crc_trailer_check(buf, len) < 0) {
		errmsg_set(reterr_msg, r, "checksum mismatch");
		goto out;
	}
	x = json_object_get(j, "volume");
	if (!json_is_string(x) || !streq(json_string_value(x), volume)) {
		errmsg_set(reterr_msg, r, "the record is not one of volume %s", volume);
		goto out;
	}
	x = json_object_get(j, "name");
	if (!json_is_string(x) || strlen(json_string_value(x)) != json_string_length(x) ||
	    !volume_name_is_valid(json_string_value(x))) {
		errmsg_set(reterr_msg, r, "invalid snapshot name");
		goto out;
	}
	strcpy(s.name, json_string_value(x));
	x = json_object_get(j, "state");
	s.state = state_from_string(json_string_value(x));
	if (s.state < 0) {
		errmsg_set(reterr_msg, r, "invalid state");
		goto out;
	}
	x = json_object_get(j, "volume_in_use");
	if (!json_is_boolean(x) || !json_is_boolean(json_object_get(j, "temporary")) ||
	    get_u64(j, "at", INT64_MAX, &u) < 0) {
		errmsg_set(reterr_msg, r, "field 'volume_in_use', 'temporary' or 'at' is invalid");
		goto out;
	}
	s.temporary = json_is_true(json_object_get(j, "temporary"));
	s.evacuation = json_is_true(json_object_get(j, "evacuation"));
	s.volume_in_use = json_is_true(x);
	s.at = (int64_t)u;
	if (get_u64(j, "frozen_ms", UINT32_MAX, &u) < 0 || get_u64(j, "entries", INT64_MAX, &s.entries) < 0 ||
	    get_u64(j, "bytes", INT64_MAX, &s.bytes) < 0) {
		errmsg_set(reterr_msg, r, "field 'frozen_ms', 'entries' or 'bytes' is invalid");
		goto out;
	}
	s.frozen_ms = (uint32_t)u;
	x = json_object_get(j, "id");
	if (x)
		snprintf(s.id, sizeof(s.id), "%s", json_string_value(x));
	s.by_move = json_is_true(json_object_get(j, "by_move"));
	if (json_object_get(j, "receive_root") &&
	    (get_u64(j, "receive_root", INT64_MAX, &s.receive_root) < 0 || s.receive_root == 0)) {
		errmsg_set(reterr_msg, r, "field 'receive_root' is invalid");
		goto out;
	}
	*ret = s;
	r = 0;
out:
	json_decref(j);
	return r;
}
