/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "volume/volume.h"
#include "volume/options-intern.h"
#include "util/errmsg.h"
#include "util/macro.h"
#include "util/strutil.h"

static const char *const state_names[_VOLUME_STATE_MAX] = {
	[VOLUME_READY] = "ready",
	[VOLUME_REMOVING] = "removing",
};

const char *volume_state_to_string(VolumeState s)
{
	return s >= 0 && s < _VOLUME_STATE_MAX ? state_names[s] : NULL;
}

VolumeState volume_state_from_string(const char *s)
{
	for (int i = 0; i < _VOLUME_STATE_MAX; i++)
		if (s && streq(s, state_names[i]))
			return (VolumeState)i;
	return _VOLUME_STATE_INVALID;
}

/* Committed has no name: it is written as no member at all. */
static const char *const index_state_names[_VOLUME_INDEX_STATE_MAX] = {
	[VOLUME_INDEX_PENDING] = "pending",
	[VOLUME_INDEX_REMOVING] = "removing",
};

Volume *volume_new(const char *name)
{
	size_t n = strnlen(name, VOLUME_NAME_MAX);
	Volume *v = calloc(1, sizeof(*v) + n + 1);

	if (!v)
		return NULL;
	v->opts = volume_options_intern(&(const VolumeOptions){});
	if (!v->opts) {
		free(v);
		return NULL;
	}
	memcpy(v->name, name, n);
	v->name[n] = '\0';
	v->refs = 1;
	pthread_mutex_init(&v->op_lock, NULL);
	return v;
}

int volume_set_options(Volume *v, const VolumeOptions *o)
{
	const VolumeOptions *shared = volume_options_intern(o);

	if (!shared)
		return -ENOMEM;
	volume_options_release(v->opts);
	v->opts = shared;
	return 0;
}

Volume *volume_ref(Volume *v)
{
	__atomic_add_fetch(&v->refs, 1, __ATOMIC_SEQ_CST);
	return v;
}

Volume *volume_unref(Volume *v)
{
	if (!v)
		return NULL;
	if (__atomic_sub_fetch(&v->refs, 1, __ATOMIC_SEQ_CST) > 0)
		return NULL;
	volume_mounts_clear(v);
	free(v->clone);
	free(v->fence);
	free(v->evacuating_to);
	free(v->snaps);
	free(v->corrupt);
	free(v->bind_options);
	json_decref(v->selftest);
	volume_options_release(v->opts);
	pthread_mutex_destroy(&v->op_lock);
	free(v);
	return NULL;
}

unsigned volume_mount_total(const Volume *v)
{
	unsigned t = 0;

	for (size_t i = 0; i < v->n_mounts; i++)
		t += v->mounts[i].count;
	return t;
}

bool mount_id_is_valid(const char *id)
{
	size_t n = id ? strlen(id) : 0;
	return n > 0 && n <= MOUNT_ID_MAX && string_is_printable_ascii(id);
}

int volume_mount_add(Volume *v, const char *id)
{
	MountRef *m;

	for (size_t i = 0; i < v->n_mounts; i++)
		if (streq(v->mounts[i].id, id)) {
			if (v->mounts[i].count >= 1000000)
				return -EOVERFLOW;
			v->mounts[i].count++;
			return 0;
		}
	if (v->n_mounts >= MOUNT_IDS_MAX)
		return -EMLINK;
	m = realloc(v->mounts, (v->n_mounts + 1) * sizeof(*m));
	if (!m)
		return -ENOMEM;
	v->mounts = m;
	m[v->n_mounts].id = strdup(id);
	if (!m[v->n_mounts].id)
		return -ENOMEM;
	m[v->n_mounts].count = 1;
	v->n_mounts++;
	return 0;
}

int volume_mount_drop(Volume *v, const char *id)
{
	for (size_t i = 0; i < v->n_mounts; i++) {
		if (!streq(v->mounts[i].id, id))
			continue;
		if (--v->mounts[i].count == 0) {
			free(v->mounts[i].id);
			v->mounts[i] = v->mounts[--v->n_mounts];
		}
		return 1;
	}
	return 0;
}

void volume_mounts_clear(Volume *v)
{
	for (size_t i = 0; i < v->n_mounts; i++)
		free(v->mounts[i].id);
	free(v->mounts);
	v->mounts = NULL;
	v->n_mounts = 0;
}


static json_t *clone_to_json(const VolumeClone *c)
{
	return json_pack("{s:s, s:I, s:b, s:s, s:I, s:I, s:I, s:I}", "from", c->from, "at", (json_int_t)c->at, "in_use",
			 c->source_in_use, "method", c->copied ? "copy" : "reflink", "frozen_ms", (json_int_t)c->frozen_ms,
			 "writeback_wait_ms", (json_int_t)c->writeback_wait_ms, "entries", (json_int_t)c->entries, "bytes",
			 (json_int_t)c->bytes);
}

static bool nonneg_int(json_t *j, const char *key, json_int_t max, json_int_t *ret)
{
	json_t *x = json_object_get(j, key);

	if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > max)
		return false;
	*ret = json_integer_value(x);
	return true;
}

static int clone_from_json(json_t *j, VolumeClone **ret)
{
	_cleanup_free_ VolumeClone *c = calloc(1, sizeof(*c));
	json_t *from = json_object_get(j, "from"), *in_use = json_object_get(j, "in_use"),
	       *method = json_object_get(j, "method");
	json_int_t at, frozen, waited = 0, entries, bytes;

	if (!c)
		return -ENOMEM;
	if (!json_is_object(j) || !json_is_string(from) || !volume_name_is_valid(json_string_value(from)) ||
	    strlen(json_string_value(from)) != json_string_length(from) || !json_is_boolean(in_use) ||
	    !json_is_string(method) || (!streq(json_string_value(method), "reflink") && !streq(json_string_value(method), "copy")) ||
	    !nonneg_int(j, "at", INT64_MAX, &at) || !nonneg_int(j, "frozen_ms", UINT32_MAX, &frozen) ||
	    !nonneg_int(j, "entries", INT64_MAX, &entries) || !nonneg_int(j, "bytes", INT64_MAX, &bytes) ||
	    /* Absent in the records of nvmevol before it. */
	    (json_object_get(j, "writeback_wait_ms") && !nonneg_int(j, "writeback_wait_ms", UINT32_MAX, &waited)))
		return -EUCLEAN;
	strcpy(c->from, json_string_value(from));
	c->at = at;
	c->source_in_use = json_is_true(in_use);
	c->copied = streq(json_string_value(method), "copy");
	c->frozen_ms = (uint32_t)frozen;
	c->writeback_wait_ms = (uint32_t)waited;
	c->entries = (uint64_t)entries;
	c->bytes = (uint64_t)bytes;
	*ret = TAKE_PTR(c);
	return 0;
}

static json_t *record_body(const Volume *v, const VolumeOptions *o, bool with_mounts, VolumeIndexState index_state)
{
	json_t *j = json_object(), *opts, *mounts;

	if (!j)
		return NULL;
	opts = volume_options_to_json(o);
	if (!opts) {
		json_decref(j);
		return NULL;
	}
	json_object_set_new(j, "version", json_integer(RECORD_VERSION));
	json_object_set_new(j, "name", json_string(v->name));
	json_object_set_new(j, "state", json_string(volume_state_to_string(v->state)));
	json_object_set_new(j, "options", opts);
	json_object_set_new(j, "partition_uuid", json_string(v->partition_uuid));
	{
		char label[sizeof(v->partition_label) * 4];
		label_escape(v->partition_label, label, sizeof(label));
		json_object_set_new(j, "partition_label", json_string(label));
	}
	json_object_set_new(j, "created_at", json_integer(v->created_at));
	if (v->projid)
		json_object_set_new(j, "projid", json_integer(v->projid));
	if (v->clone)
		json_object_set_new(j, "clone", clone_to_json(v->clone));
	if (v->fence)
		json_object_set_new(j, "moved_to", json_pack("{s:s,s:I,s:I}", "host", v->fence->host, "at",
							      (json_int_t)v->fence->at, "generation",
							      (json_int_t)v->fence->generation));
	if (v->fence_generation)
		json_object_set_new(j, "fence_generation", json_integer((json_int_t)v->fence_generation));
	if (v->evacuating_to)
		json_object_set_new(j, "evacuating_to", json_string(v->evacuating_to));
	if (index_state > VOLUME_INDEX_COMMITTED && index_state < _VOLUME_INDEX_STATE_MAX)
		json_object_set_new(j, "index_state", json_string(index_state_names[index_state]));
	if (with_mounts) {
		mounts = json_object();
		for (size_t i = 0; mounts && i < v->n_mounts; i++)
			json_object_set_new(mounts, v->mounts[i].id, json_integer(v->mounts[i].count));
		json_object_set_new(j, "mounts", mounts);
	}
	return j;
}

/* The canonical body: compact, keys sorted. Its bytes are what the CRC covers. */
static char *body_dump(const Volume *v, const VolumeOptions *o, bool with_mounts, VolumeIndexState index_state)
{
	json_t *j = record_body(v, o, with_mounts, index_state);
	char *s;

	if (!j)
		return NULL;
	s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(j);
	return s;
}

/*
 * The file is the canonical body with a last member "crc" appended:
 * {"created_at":...,"version":1,"crc":N}, where N is the CRC32C of the body
 * exactly as it was written ({"created_at":...,"version":1}). Loading checks
 * the bytes it read, without serialising the record again.
 */
char *volume_record_dump(const Volume *v, bool with_mounts)
{
	_cleanup_free_ char *b = body_dump(v, v->opts, with_mounts, VOLUME_INDEX_COMMITTED);

	return crc_trailer_append(b);
}

char *volume_index_dump(const Volume *v, VolumeIndexState state)
{
	VolumeOptions granted = *v->opts;
	_cleanup_free_ char *b = NULL;

	if (v->grants_unconfirmed)
		granted.allow_suid = granted.allow_devices = false;
	b = body_dump(v, &granted, false, state);
	return crc_trailer_append(b);
}

bool volume_grants_confirmed(const VolumeOptions *rec, const VolumeOptions *granted)
{
	return (!rec->allow_suid || granted->allow_suid) && (!rec->allow_devices || granted->allow_devices);
}

static int fence_from_json(json_t *j, VolumeFence **ret)
{
	_cleanup_free_ VolumeFence *f = calloc(1, sizeof(*f));
	json_t *host = json_object_get(j, "host");
	const char *h = json_string_value(host);
	json_int_t at, gen;

	if (!f)
		return -ENOMEM;
	if (!json_is_object(j) || !h || strlen(h) != json_string_length(host) || !h[0] || strlen(h) > VOLUME_FENCE_HOST_MAX ||
	    !string_is_printable_ascii(h) || strchr(h, ' ') || !nonneg_int(j, "at", INT64_MAX, &at) ||
	    !nonneg_int(j, "generation", INT64_MAX, &gen) || gen == 0)
		return -EUCLEAN;
	strcpy(f->host, h);
	f->at = at;
	f->generation = (uint64_t)gen;
	*ret = TAKE_PTR(f);
	return 0;
}

static int index_state_parse(json_t *x, VolumeIndexState *ret)
{
	if (!x) {
		*ret = VOLUME_INDEX_COMMITTED;
		return 0;
	}
	for (int i = VOLUME_INDEX_COMMITTED + 1; i < _VOLUME_INDEX_STATE_MAX; i++)
		if (json_is_string(x) && streq(json_string_value(x), index_state_names[i])) {
			*ret = (VolumeIndexState)i;
			return 0;
		}
	return -EUCLEAN;
}

static int copy_short_string(json_t *j, const char *key, char *dst, size_t size, char **reterr_msg)
{
	json_t *s = json_object_get(j, key);

	if (!json_is_string(s) || json_string_length(s) >= size || strlen(json_string_value(s)) != json_string_length(s) ||
	    !string_is_printable_ascii(json_string_value(s)))
		return errmsg_set(reterr_msg, -EUCLEAN, "field '%s' is missing or invalid", key);
	strcpy(dst, json_string_value(s));
	return 0;
}

int volume_record_parse(const char *buf, size_t len, Volume **ret, char **reterr_msg)
{
	json_error_t jerr;
	json_t *j, *crc, *opts, *mounts, *x, *val;
	Volume *v = NULL;
	const char *key;
	char name[VOLUME_NAME_MAX + 2];
	int r;

	if (len > RECORD_SIZE_MAX)
		return errmsg_set(reterr_msg, -EUCLEAN, "record larger than %d bytes", RECORD_SIZE_MAX);
	j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!j)
		return errmsg_set(reterr_msg, -EUCLEAN, "not valid JSON: %s", jerr.text);
	if (!json_is_object(j)) {
		r = errmsg_set(reterr_msg, -EUCLEAN, "not a JSON object");
		goto out;
	}
	x = json_object_get(j, "version");
	if (!json_is_integer(x) || json_integer_value(x) != RECORD_VERSION) {
		r = errmsg_set(reterr_msg, -EUCLEAN, "unsupported record version");
		goto out;
	}
	crc = json_object_get(j, "crc");
	if (!json_is_integer(crc)) {
		r = errmsg_set(reterr_msg, -EUCLEAN, "no checksum");
		goto out;
	}
	if (crc_trailer_check(buf, len) < 0) {
		r = errmsg_set(reterr_msg, -EUCLEAN, "checksum mismatch");
		goto out;
	}

	r = copy_short_string(j, "name", name, sizeof(name), reterr_msg);
	if (r < 0)
		goto out;
	if (!volume_name_is_valid(name)) {
		r = errmsg_set(reterr_msg, -EUCLEAN, "invalid volume name");
		goto out;
	}
	v = volume_new(name);
	if (!v) {
		r = -ENOMEM;
		goto out;
	}
	x = json_object_get(j, "state");
	v->state = volume_state_from_string(json_string_value(x));
	if (v->state < 0) {
		r = errmsg_set(reterr_msg, -EUCLEAN, "invalid state");
		goto out;
	}
	opts = json_object_get(j, "options");
	if (!json_is_object(opts)) {
		r = errmsg_set(reterr_msg, -EUCLEAN, "field 'options' is missing");
		goto out;
	}
	{
		_cleanup_free_ char *oerr = NULL;
		VolumeOptions o;
		if (volume_options_parse(opts, &o, &oerr) < 0) {
			r = errmsg_set(reterr_msg, -EUCLEAN, "invalid options: %s", oerr ? oerr : "?");
			goto out;
		}
		r = volume_set_options(v, &o);
		if (r < 0)
			goto out;
	}
	r = copy_short_string(j, "partition_uuid", v->partition_uuid, sizeof(v->partition_uuid), reterr_msg);
	if (r < 0)
		goto out;
	/* Any label mkfs.xfs accepts, escaped (0.1 wrote it raw: printable ASCII round-trips either way). */
	x = json_object_get(j, "partition_label");
	if (!json_is_string(x) || label_unescape(json_string_value(x), v->partition_label, sizeof(v->partition_label)) < 0) {
		r = errmsg_set(reterr_msg, -EUCLEAN, "field 'partition_label' is missing or invalid");
		goto out;
	}
	x = json_object_get(j, "created_at");
	if (!json_is_integer(x) || json_integer_value(x) < 0) {
		r = errmsg_set(reterr_msg, -EUCLEAN, "field 'created_at' is missing or invalid");
		goto out;
	}
	v->created_at = json_integer_value(x);
	x = json_object_get(j, "projid");
	if (x) {
		if (!json_is_integer(x) || json_integer_value(x) <= 0 || json_integer_value(x) > UINT32_MAX - 1) {
			r = errmsg_set(reterr_msg, -EUCLEAN, "field 'projid' is invalid");
			goto out;
		}
		v->projid = (uint32_t)json_integer_value(x);
	}
	x = json_object_get(j, "clone");
	if (x && clone_from_json(x, &v->clone) < 0) {
		r = errmsg_set(reterr_msg, -EUCLEAN, "field 'clone' is invalid");
		goto out;
	}
	x = json_object_get(j, "moved_to");
	if (x && fence_from_json(x, &v->fence) < 0) {
		r = errmsg_set(reterr_msg, -EUCLEAN, "field 'moved_to' is invalid");
		goto out;
	}
	x = json_object_get(j, "fence_generation");
	if (x) {
		if (!json_is_integer(x) || json_integer_value(x) <= 0) {
			r = errmsg_set(reterr_msg, -EUCLEAN, "field 'fence_generation' is invalid");
			goto out;
		}
		v->fence_generation = (uint64_t)json_integer_value(x);
	}
	if (json_object_get(j, "evacuating_to")) {
		char uuid[40];

		r = copy_short_string(j, "evacuating_to", uuid, sizeof(uuid), reterr_msg);
		if (r < 0)
			goto out;
		v->evacuating_to = strdup(uuid);
		if (!v->evacuating_to) {
			r = -ENOMEM;
			goto out;
		}
	}
	/* An unknown value (a newer version's) is unreadable: never taken for "committed", nor for "pending". */
	if (index_state_parse(json_object_get(j, "index_state"), &v->index_state) < 0) {
		r = errmsg_set(reterr_msg, -EUCLEAN, "field 'index_state' is invalid");
		goto out;
	}
	mounts = json_object_get(j, "mounts");
	if (mounts && !json_is_object(mounts)) {
		r = errmsg_set(reterr_msg, -EUCLEAN, "field 'mounts' is invalid");
		goto out;
	}
	json_object_foreach(mounts, key, val) {
		json_int_t n = json_is_integer(val) ? json_integer_value(val) : 0;
		if (!mount_id_is_valid(key) || n <= 0 || n > 1000000) {
			r = errmsg_set(reterr_msg, -EUCLEAN, "invalid mount count");
			goto out;
		}
		r = volume_mount_add(v, key);
		if (r < 0)
			goto out;
		v->mounts[v->n_mounts - 1].count = (unsigned)n;
	}
	*ret = TAKE_PTR(v);
	r = 0;
out:
	volume_unref(v);
	json_decref(j);
	return r;
}
