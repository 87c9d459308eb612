/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool/cordon.h"
#include "util/alloc-util.h"
#include "util/fs-util.h"
#include "util/macro.h"
#include "util/strutil.h"

#define CORDON_RECORD_MAX 4096

static const char *const source_names[_CORDON_SOURCE_MAX] = {
	[CORDON_BY_ADMIN] = "admin",
	[CORDON_BY_HEALTH] = "health",
};

const char *cordon_source_to_string(CordonSource s)
{
	return s >= 0 && s < _CORDON_SOURCE_MAX ? source_names[s] : NULL;
}

static CordonSource source_from_string(const char *s)
{
	for (int i = 0; i < _CORDON_SOURCE_MAX; i++)
		if (s && streq(s, source_names[i]))
			return (CordonSource)i;
	return _CORDON_SOURCE_INVALID;
}

int cordon_read(int tree_fd, PartitionCordon *ret)
{
	_cleanup_free_ char *buf = NULL;
	json_t *j, *since;
	const char *by, *reason;
	size_t len;
	int r;

	*ret = (PartitionCordon){ 0 };
	r = read_file_at(tree_fd, CORDON_RECORD, CORDON_RECORD_MAX, &buf, &len);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
	by = json_string_value(json_object_get(j, "by"));
	reason = json_string_value(json_object_get(j, "reason"));
	since = json_object_get(j, "since");
	ret->by = source_from_string(by);
	/* A damaged file still cordons: being wrong that way never places a volume on a failing disk. */
	ret->on = true;
	if (!json_is_object(j) || ret->by < 0 || !json_is_integer(since) || !reason) {
		json_decref(j);
		ret->by = CORDON_BY_ADMIN;
		snprintf(ret->reason, sizeof(ret->reason), "nvmevol/%s is damaged", CORDON_RECORD);
		return -EUCLEAN;
	}
	ret->since = json_integer_value(since);
	snprintf(ret->reason, sizeof(ret->reason), "%s", reason);
	json_decref(j);
	return 0;
}

int cordon_write(int tree_fd, const PartitionCordon *c)
{
	_cleanup_free_ char *s = NULL;
	json_t *j;

	if (!c->on)
		return unlink_durable_at(tree_fd, CORDON_RECORD);
	j = json_pack("{s:i,s:s,s:I,s:s}", "version", 1, "by", cordon_source_to_string(c->by), "since",
		      (json_int_t)c->since, "reason", c->reason);
	s = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(j);
	if (!s)
		return -ENOMEM;
	return write_file_atomic_at(tree_fd, CORDON_RECORD, s, strlen(s), 0644);
}
