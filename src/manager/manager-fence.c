/* SPDX-License-Identifier: MIT */
/*
 * Fences: the state a moved volume's source is left in. The record says
 * where it went ("moved_to": host, time, generation), a Mount here is
 * refused with an Err naming that host, and Get, List and Remove work as
 * before. The fence is one record write (temp file, fsync, rename, fsync of
 * meta/): before it the volume is served, after it it is fenced, and a crash
 * leaves one or the other.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "manager/manager-internal.h"
#include "util/errmsg.h"
#include "util/time-util.h"
#include "util/macro.h"

int manager_fence_check_mount(const Volume *v, char **reterr_msg)
{
	char stamp[40];

	if (!v->fence)
		return 0;
	format_rfc3339(v->fence->at, stamp, sizeof(stamp));
	return errmsg_set(reterr_msg, -EPERM,
			  "volume %s was moved to %s at %s (generation %llu) and is fenced here, so that two nodes never "
			  "write it: run the container on %s, or, to use this copy again (its data as of the move), run "
			  "'nvmevol volume unfence %s' on this host",
			  v->name, v->fence->host, stamp, (unsigned long long)v->fence->generation, v->fence->host, v->name);
}

void manager_fence_add_status(const Volume *v, json_t *status)
{
	char stamp[40];

	json_object_set_new(status, "fenced", json_boolean(v->fence != NULL));
	if (!v->fence)
		return;
	format_rfc3339(v->fence->at, stamp, sizeof(stamp));
	json_object_set_new(status, "moved_to", json_pack("{s:s,s:s,s:I}", "host", v->fence->host, "at", stamp,
							  "generation", (json_int_t)v->fence->generation));
}

/* The partition of @v, present and writable, for a record write (*ret_fs: a reference); an Err otherwise. */
static int writable_fs(Manager *m, Volume *v, PartitionFs **ret_fs, char **reterr_msg)
{
	PartitionInfo info;
	PartitionFs *fs;

	if (v->corrupt)
		return errmsg_set(reterr_msg, -EUCLEAN, "volume %s: its record is unreadable (%s)", v->name, v->corrupt);
	fs = v->index_only ? NULL : partition_fs_get(m->pool, v->part);
	partition_snapshot(m->pool, v->part, &info);
	if (!fs)
		return errmsg_set(reterr_msg, -ENODEV, "volume %s: its partition UUID %s is not available; its record "
				  "lives there", v->name, v->partition_uuid);
	if (fs->read_only) {
		partition_fs_put(fs);
		return errmsg_set(reterr_msg, -EROFS, "volume %s: partition UUID %s is read-only until adopted: run "
				  "'nvmevol partition adopt %s' first", v->name, info.uuid, info.uuid);
	}
	*ret_fs = fs;
	return 0;
}

typedef struct FenceArgs {
	const char *host; /* NULL: unfence */
	json_t *result;
} FenceArgs;

/*
 * Writes @v's record with @fence (NULL: none) and @generation. On success @v owns
 * @fence and the old fence is freed; on failure @v is as it was and @fence is
 * still the caller's.
 */
static int save_fence(Manager *m, Volume *v, PartitionFs *fs, VolumeFence *fence, uint64_t generation,
		      char **reterr_msg)
{
	VolumeFence *old = v->fence;
	uint64_t old_gen = v->fence_generation;
	int r;

	registry_write_lock(m->reg);
	v->fence = fence;
	v->fence_generation = generation;
	registry_unlock(m->reg);
	r = store_save_record(fs, v);
	registry_write_lock(m->reg);
	if (r < 0) {
		v->fence = old;
		v->fence_generation = old_gen;
		old = NULL; /* @fence stays the caller's (fence_fn frees it): freeing it here freed it twice */
	}
	registry_unlock(m->reg);
	free(old);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot write the record of volume %s: %s", v->name, errno_str(r));
	/* The index entry matters only while the partition is missing; a stale one is corrected at the next start. */
	(void)store_save_index(m->store, v, VOLUME_INDEX_COMMITTED);
	return 0;
}

static int fence_fn(Manager *m, Volume *v, void *userdata, char **reterr_msg)
{
	FenceArgs *a = userdata;
	_cleanup_free_ VolumeFence *f = NULL;
	PartitionFs *fs;
	char stamp[40];
	int r;

	if (a->host && v->mounted)
		return errmsg_set(reterr_msg, -EBUSY, "volume %s is mounted (%u mount(s)): a volume is fenced once no "
				  "container uses it; stop them first", v->name, volume_mount_total(v));
	if (a->host && v->fence && streq(v->fence->host, a->host)) {
		format_rfc3339(v->fence->at, stamp, sizeof(stamp));
		a->result = json_pack("{s:s,s:s,s:s,s:s,s:I}", "name", v->name, "result", "already fenced", "host",
				      v->fence->host, "at", stamp, "generation", (json_int_t)v->fence->generation);
		return a->result ? 0 : -ENOMEM;
	}
	if (!a->host && !v->fence) {
		a->result = json_pack("{s:s,s:s}", "name", v->name, "result", "not fenced");
		return a->result ? 0 : -ENOMEM;
	}
	r = writable_fs(m, v, &fs, reterr_msg);
	if (r < 0)
		return r;
	if (a->host) {
		f = calloc(1, sizeof(*f));
		if (!f) {
			partition_fs_put(fs);
			return -ENOMEM;
		}
		snprintf(f->host, sizeof(f->host), "%s", a->host);
		f->at = (int64_t)time(NULL);
		f->generation = v->fence_generation + 1;
	}
	r = save_fence(m, v, fs, f, f ? f->generation : v->fence_generation, reterr_msg);
	partition_fs_put(fs);
	if (r < 0)
		return r;
	if (!a->host) {
		log_info("volume %s: unfenced; it may be mounted here again", v->name);
		a->result = json_pack("{s:s,s:s}", "name", v->name, "result", "unfenced");
		return a->result ? 0 : -ENOMEM;
	}
	format_rfc3339(v->fence->at, stamp, sizeof(stamp));
	log_info("volume %s: fenced, moved to %s (generation %llu); Mount refused here until unfenced", v->name,
		 v->fence->host, (unsigned long long)v->fence->generation);
	TAKE_PTR(f);
	a->result = json_pack("{s:s,s:s,s:s,s:s,s:I}", "name", v->name, "result", "fenced", "host", v->fence->host, "at",
			      stamp, "generation", (json_int_t)v->fence->generation);
	return a->result ? 0 : -ENOMEM;
}

static int run_fence(Manager *m, const char *name, const char *host, json_t **ret_result, char **reterr_msg)
{
	FenceArgs a = { .host = host };
	int r = manager_run_on_volume(m, name, false, fence_fn, &a, reterr_msg);

	if (r == 0)
		*ret_result = a.result;
	else
		json_decref(a.result);
	return r;
}

int manager_volume_fence(Manager *m, const char *name, const char *host, json_t **ret_result, char **reterr_msg)
{
	return run_fence(m, name, host, ret_result, reterr_msg);
}

int manager_volume_unfence(Manager *m, const char *name, json_t **ret_result, char **reterr_msg)
{
	return run_fence(m, name, NULL, ret_result, reterr_msg);
}
