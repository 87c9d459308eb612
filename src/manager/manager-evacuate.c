/* SPDX-License-Identifier: MIT */
/*
 * Evacuate: every volume of a partition P moved to other partitions of this
 * host, each keeping its name, options, owner and limits (a new project ID
 * on its target T). P is cordoned first. A volume in use waits (listed), one
 * with snapshots is refused (named): its snapshots live on P and are not
 * volumes that can follow it.
 *
 * One volume's move, under create_lock and its op_lock (so no Mount, Remove
 * or Create of it runs meanwhile), in the order that keeps it whole on
 * exactly one partition at every instant:
 *   1. P's record gets "evacuating_to": T (the mark start-up recognises);
 *   2. the index entry names T, "pending" (as a Create's: a directory on T
 *      without a record goes to the trash at start);
 *   3. T:volumes/NAME is made (owner, mode, new project ID, limits) and the
 *      tree copied into it by the clone engine across filesystems, verified
 *      under a brief freeze of P (sizes, times, names, types, links: the copy
 *      path's frozen check), then synced;
 *   4. T's record is written: the commit point;
 *   5. the index entry names T, committed;
 *   6. P's directory goes to the trash, then P's record is deleted;
 *   7. the registry serves the new volume; a Mount that waited for the old
 *      one looks the name up again.
 * Start-up (manager_evacuate_recover): a served volume whose record on P
 * still has the mark and T has no record (a crash before 4): the mark is
 * cleared and the index names P again (T's directory went to the trash with
 * the pending entry); a shadow on P with the mark next to the served record
 * on T (a crash after 4): its directory goes to the trash, its record is
 * deleted. A marked record whose T is missing is not mounted until T is back.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clone/clone.h"
#include "manager/manager-internal.h"
#include "pool/sizelimit.h"
#include "util/alloc-util.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/log.h"
#include "util/macro.h"

typedef struct Evacuation {
	Manager *m;
	Partition *src, *to; /* @to NULL: placement's choice per volume */
	PartitionFs *sfs;
	PartitionInfo sinfo;
	json_t *moved, *waiting, *refused;
} Evacuation;

static void note(json_t *arr, const char *name, const char *why)
{
	json_array_append_new(arr, json_pack("{s:s,s:s}", "name", name, "why", why));
}

/* The new volume: @v's record on @part, without a project ID (the target's own is given when its directory is made). */
static Volume *successor(const Volume *v, Partition *part, const PartitionInfo *info)
{
	Volume *nv = volume_new(v->name);

	if (!nv)
		return NULL;
	nv->state = VOLUME_READY;
	nv->opts = v->opts;
	nv->created_at = v->created_at;
	nv->grants_unconfirmed = v->grants_unconfirmed;
	nv->fence_generation = v->fence_generation;
	nv->part = part;
	snprintf(nv->partition_uuid, sizeof(nv->partition_uuid), "%s", info->uuid);
	snprintf(nv->partition_label, sizeof(nv->partition_label), "%s", info->label);
	if (v->clone && (nv->clone = malloc(sizeof(*nv->clone))))
		*nv->clone = *v->clone;
	if (v->fence && (nv->fence = malloc(sizeof(*nv->fence))))
		*nv->fence = *v->fence;
	if ((v->clone && !nv->clone) || (v->fence && !nv->fence))
		return volume_unref(nv);
	return nv;
}

/* Sets or clears @v's mark in its record on @fs (registry write lock for the field). */
static int mark(Manager *m, Volume *v, PartitionFs *fs, const char *to_uuid)
{
	char old[sizeof(v->evacuating_to)];
	int r;

	memcpy(old, v->evacuating_to, sizeof(old));
	registry_write_lock(m->reg);
	snprintf(v->evacuating_to, sizeof(v->evacuating_to), "%s", to_uuid);
	registry_unlock(m->reg);
	r = store_save_record(fs, v);
	if (r < 0) {
		registry_write_lock(m->reg);
		memcpy(v->evacuating_to, old, sizeof(old));
		registry_unlock(m->reg);
	}
	return r;
}

/* Copies @v's tree on @sfs into @nv's new directory on @tfs (step 3), verified under a freeze of @sfs. */
static int copy_tree(Manager *m, const PartitionInfo *sinfo, Volume *v, PartitionFs *sfs, Volume *nv, PartitionFs *tfs,
		     CloneStats *st, char **reterr_msg)
{
	_cleanup_close_ int sfd = -EBADF, dfd = -EBADF;
	_cleanup_free_ char *why = NULL;
	const FreezeMarker marker = { .dir_fd = store_freeze_dir(m->store), .name = sinfo->uuid };
	CloneParams p = { .freeze_budget_ms = (unsigned)m->cfg->clone_freeze_budget_ms, .allow_copy = true,
			  .other_fs = true, .mem_max = m->cfg->clone_memory_mb << 20, .freeze_fd = sfs->root_fd,
			  .freeze_marker = &marker };
	int r;

	sfd = openat(sfs->volumes_fd, v->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	dfd = openat(tfs->volumes_fd, nv->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0 || dfd < 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot open volume %s on its partitions: %s", v->name,
				  errno_str(errno));
	p.src_fd = sfd;
	p.dst_fd = dfd;
	r = clone_tree(&p, st, &why);
	if (r == -EBUSY)
		return errmsg_set(reterr_msg, r, "volume %s was written to while it was copied (%s): something uses it "
				  "that the plugin does not see; stop it and evacuate again", v->name, why ? why : "?");
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot copy volume %s: %s", v->name, why ? why : errno_str(r));
	return 0;
}

/* Steps 1-7 for @v (op_lock held) to @to. On failure before the commit point, everything is as it was. */
static int move_one(Evacuation *e, Volume *v, Partition *to, char **reterr_msg)
{
	Manager *m = e->m;
	_cleanup_(volume_unrefp) Volume *nv = NULL;
	char tname[PARTITION_NAME_MAX], entry[TRASH_ENTRY_MAX];
	PartitionFs *tfs = partition_fs_get(m->pool, to);
	PartitionInfo tinfo;
	CloneStats st = { 0 };
	uint64_t need = 0, inodes = 0, free_b = 0;
	bool made_dir = false, marked = false, indexed = false;
	int r;

	partition_snapshot(m->pool, to, &tinfo);
	partition_display_name(&tinfo, tname, sizeof(tname));
	if (!tfs)
		return errmsg_set(reterr_msg, -ENODEV, "partition %s went away: %s", tname, tinfo.problem);
	r = manager_check_target(m, to, tfs, &tinfo, tname, v->name, &v->opts, reterr_msg);
	if (r < 0)
		goto out;
	/* Room for it, as a clear Err before anything is written (a copy shares no blocks). */
	{
		_cleanup_close_ int sfd = openat(e->sfs->volumes_fd, v->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		_cleanup_free_ char *why = NULL;

		r = sfd < 0 ? negative_errno() : clone_measure(sfd, &need, &inodes, &why);
		if (r < 0) {
			r = errmsg_set(reterr_msg, r, "cannot measure volume %s: %s", v->name, why ? why : errno_str(r));
			goto out;
		}
	}
	if (partition_fs_free_bytes(tfs, &free_b, NULL) == 0 && need > free_b) {
		r = errmsg_set(reterr_msg, -ENOSPC, "volume %s needs %llu bytes, partition %s has %llu free: free space "
			       "there, or name another with --to", v->name, (unsigned long long)need, tname,
			       (unsigned long long)free_b);
		goto out;
	}
	nv = successor(v, to, &tinfo);
	if (!nv) {
		r = errmsg_set(reterr_msg, -ENOMEM, "out of memory");
		goto out;
	}

	marked = true;
	r = mark(m, v, e->sfs, tinfo.uuid); /* 1 */
	if (r < 0) {
		marked = false;
		r = errmsg_set(reterr_msg, r, "cannot write the record of volume %s: %s", v->name, errno_str(r));
		goto out;
	}
	indexed = true;
	r = store_save_index(m->store, nv, VOLUME_INDEX_PENDING); /* 2 */
	if (r < 0) {
		r = errmsg_set(reterr_msg, r, "cannot write the volume index in %s: %s", store_path(m->store), errno_str(r));
		goto out;
	}
	r = manager_make_volume_dir(m, nv, tfs, tname, &made_dir, reterr_msg); /* 3 */
	if (r == 0)
		r = copy_tree(m, &e->sinfo, v, e->sfs, nv, tfs, &st, reterr_msg);
	if (r == 0 && (r = store_save_record(tfs, nv)) < 0) /* 4: the commit point */
		r = errmsg_set(reterr_msg, r, "cannot write the record of volume %s on partition %s: %s", v->name, tname,
			       errno_str(r));
	if (r < 0)
		goto out;

	/* Committed: whatever fails from here on is finished at the next start. */
	if (store_save_index(m->store, nv, VOLUME_INDEX_COMMITTED) < 0) /* 5 */
		log_warning("volume %s: cannot mark its index entry committed; start-up does", v->name);
	if (trash_move_in(e->sfs, e->sfs->volumes_fd, v->name, entry) == 0) { /* 6 */
		(void)trash_enqueue(m->trash, e->sfs, e->sinfo.uuid, entry);
		if (store_delete_record(e->sfs, v->name) < 0)
			log_warning("volume %s: cannot delete its old record on partition UUID %s; start-up does", v->name,
				    e->sinfo.uuid);
	} else
		log_warning("volume %s: cannot move its old directory on partition UUID %s to the trash; start-up does",
			    v->name, e->sinfo.uuid);
	registry_write_lock(m->reg); /* 7 */
	v->removed = v->replaced = true;
	registry_remove_locked(m->reg, v);
	r = registry_insert_locked(m->reg, nv);
	registry_unlock(m->reg);
	if (r < 0)
		log_error("volume %s: moved to partition %s but cannot be registered (%s); restart the plugin", v->name,
			  tinfo.uuid, errno_str(r));
	sizelimit_commit_id(&m->projids, to, nv->projid);
	log_info("volume %s: evacuated from partition UUID %s to %s (UUID %s): %llu entries, %llu bytes in %.1f ms, "
		 "%.1f ms frozen", v->name, e->sinfo.uuid, tname, tinfo.uuid,
		 (unsigned long long)(st.files + st.dirs + st.symlinks + st.specials + st.hardlinks),
		 (unsigned long long)st.bytes, st.elapsed_us / 1000.0, st.frozen_us / 1000.0);
	json_array_append_new(e->moved, json_pack("{s:s,s:s,s:I,s:I,s:I}", "name", v->name, "to", tinfo.uuid, "bytes",
						  (json_int_t)st.bytes, "entries",
						  (json_int_t)(st.files + st.dirs + st.symlinks + st.specials + st.hardlinks),
						  "frozen_ms", (json_int_t)((st.frozen_us + 999) / 1000)));
	r = 0;
	goto done;

out:
	/* Undo what this move did, newest first: the volume stays on P, as it was. */
	if (made_dir) {
		if (trash_move_in(tfs, tfs->volumes_fd, nv->name, entry) == 0)
			(void)trash_enqueue(m->trash, tfs, tinfo.uuid, entry);
		else
			(void)rm_rf_at(tfs->volumes_fd, nv->name);
		(void)fsync(tfs->volumes_fd);
	}
	if (nv)
		sizelimit_release(&m->projids, to, tfs, nv->projid);
	if (indexed && store_save_index(m->store, v, VOLUME_INDEX_COMMITTED) < 0)
		log_error("volume %s: cannot put its index entry back (start-up does)", v->name);
	if (marked && mark(m, v, e->sfs, "") < 0)
		log_error("volume %s: cannot clear its evacuation mark (start-up does)", v->name);
done:
	partition_fs_put(tfs);
	return r;
}

/* One volume of P: moved, waiting (in use) or refused (why). */
static int evacuate_fn(Manager *m, Volume *v, void *userdata, char **reterr_msg)
{
	Evacuation *e = userdata;
	_cleanup_free_ char *err = NULL;
	char use[PATH_MAX + 128] = "", why[512];
	Partition *to;
	bool mounted;

	if (v->part != e->src)
		return 0; /* moved or replaced meanwhile */
	if (v->corrupt) {
		snprintf(why, sizeof(why), "its record is unreadable (%s)", v->corrupt);
		note(e->refused, v->name, why);
		return 0;
	}
	if (v->n_snaps > 0) {
		snprintf(why, sizeof(why), "it has %zu snapshot(s) (the first: %s), which stay on this partition: remove "
			 "them ('nvmevol volume snapshot-rm %s SNAP'), exporting them first if they are to be kept",
			 v->n_snaps, v->snaps[0].name, v->name);
		note(e->refused, v->name, why);
		return 0;
	}
	registry_read_lock(m->reg);
	mounted = v->mounted;
	registry_unlock(m->reg);
	if (manager_volume_known_in_use(v, e->sfs, mounted, use, sizeof(use))) {
		note(e->waiting, v->name, use);
		return 0;
	}
	to = e->to ? e->to : pool_pick_most_free(m->pool);
	if (!to || to == e->src) {
		note(e->refused, v->name, "no other partition of this host takes new volumes (present, adopted, not "
					  "cordoned, with room): add one, or uncordon one");
		return 0;
	}
	if (move_one(e, v, to, &err) < 0)
		note(e->refused, v->name, err ? err : "failed");
	(void)reterr_msg;
	return 0;
}

int manager_partition_evacuate(Manager *m, const char *ref, const char *to, json_t **ret_result, char **reterr_msg)
{
	Evacuation e = { .m = m };
	PartitionCordon c = { .on = true, .by = CORDON_BY_ADMIN, .since = (int64_t)time(NULL) };
	char **names = NULL;
	size_t n = 0;
	int r;

	pthread_mutex_lock(&m->create_lock);
	e.src = pool_find_ref(m->pool, ref, true);
	if (!e.src) {
		r = errmsg_set(reterr_msg, -ENOENT, "no present partition has the label or UUID '%s'; 'nvmevol status' "
			       "lists them", ref);
		goto unlock;
	}
	if (to) {
		e.to = pool_find_ref(m->pool, to, true);
		if (!e.to || e.to == e.src) {
			r = errmsg_set(reterr_msg, e.to ? -EINVAL : -ENOENT, e.to ? "--to names the partition being evacuated"
				       : "no present partition has the label or UUID '%s' (--to)", to);
			goto unlock;
		}
	}
	partition_snapshot(m->pool, e.src, &e.sinfo);
	/* Cordoned first: nothing new lands there while its volumes leave. */
	if (!e.sinfo.cordon.on) {
		snprintf(c.reason, sizeof(c.reason), "being evacuated");
		r = manager_cordon_set(m, e.src, &c, reterr_msg);
		if (r < 0)
			goto unlock;
	}
	e.sfs = partition_fs_get(m->pool, e.src);
	e.moved = json_array();
	e.waiting = json_array();
	e.refused = json_array();
	if (!e.sfs || !e.moved || !e.waiting || !e.refused) {
		r = errmsg_set(reterr_msg, e.sfs ? -ENOMEM : -ENODEV, "partition %s went away or out of memory", ref);
		goto unlock;
	}
	registry_read_lock(m->reg);
	for (size_t i = 0; i < registry_size_locked(m->reg); i++) {
		Volume *v = registry_at_locked(m->reg, i);
		char **nn;

		if (v->part != e.src)
			continue;
		nn = realloc(names, (n + 1) * sizeof(*nn));
		if (!nn || !(nn[n] = strdup(v->name))) {
			names = nn ? nn : names;
			break;
		}
		names = nn;
		n++;
	}
	registry_unlock(m->reg);
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *err = NULL;
		/* create_lock is held: each volume under its op_lock only. */
		if (manager_run_on_volume(m, names[i], false, evacuate_fn, &e, &err) < 0 && err)
			note(e.refused, names[i], err);
	}
	*ret_result = json_pack("{s:s,s:O,s:O,s:O}", "partition", e.sinfo.uuid, "moved", e.moved, "waiting", e.waiting,
				"refused", e.refused);
	r = *ret_result ? 0 : -ENOMEM;
unlock:
	pthread_mutex_unlock(&m->create_lock);
	names_free(names, n);
	partition_fs_put(e.sfs);
	json_decref(e.moved);
	json_decref(e.waiting);
	json_decref(e.refused);
	return r;
}

int manager_evacuate_check_mount(const Volume *v, char **reterr_msg)
{
	if (!v->evacuating_to[0])
		return 0;
	return errmsg_set(reterr_msg, -EBUSY,
			  "volume %s: its evacuation to partition UUID %s was interrupted and that partition is not here, "
			  "so nvmevol cannot tell which copy is the volume: attach it and restart the plugin (start-up "
			  "finishes or undoes the evacuation)", v->name, v->evacuating_to);
}

/* ---- start-up ---- */

typedef struct Leftover {
	Volume **v;
	size_t n;
} Leftover;

static void collect_shadow(Volume *shadow, void *userdata)
{
	Leftover *l = userdata;
	Volume **nv;

	if (!shadow->evacuating_to[0] || !(nv = realloc(l->v, (l->n + 1) * sizeof(*nv))))
		return;
	l->v = nv;
	l->v[l->n++] = volume_ref(shadow);
}

/* A shadow on P with the mark, its volume served from T: the evacuation was committed; P's copy goes. */
static void finish(Manager *m, Volume *s)
{
	_cleanup_(volume_unrefp) Volume *served = registry_lookup(m->reg, s->name);
	PartitionFs *fs;
	PartitionInfo info;
	char entry[TRASH_ENTRY_MAX];

	if (!served || !streq(served->partition_uuid, s->evacuating_to))
		return; /* not the evacuation's target that is served: a real conflict, left alone */
	fs = partition_fs_get(m->pool, s->part);
	partition_snapshot(m->pool, s->part, &info);
	if (fs && !fs->read_only) {
		if (trash_move_in(fs, fs->volumes_fd, s->name, entry) == 0)
			(void)trash_enqueue(m->trash, fs, info.uuid, entry);
		if (store_delete_record(fs, s->name) == 0) {
			registry_write_lock(m->reg);
			registry_remove_shadow_locked(m->reg, s);
			registry_unlock(m->reg);
			log_info("volume %s: its evacuation to partition UUID %s was interrupted after its commit; the old "
				 "copy on partition UUID %s is deleted", s->name, s->evacuating_to, info.uuid);
		}
	}
	partition_fs_put(fs);
}

/* A served volume still marked: a crash before the commit (T has no record), undone; or T is missing, kept marked. */
static void undo(Manager *m, Volume *v)
{
	Partition *to = pool_find_uuid(m->pool, v->evacuating_to);
	PartitionFs *fs, *tfs = to ? partition_fs_get(m->pool, to) : NULL;
	bool target_has_it = tfs && store_has_record(tfs, v->name);

	partition_fs_put(tfs);
	if (!tfs) {
		log_error("volume %s: its evacuation to partition UUID %s was interrupted and that partition is missing; "
			  "not mounted until it is back", v->name, v->evacuating_to);
		return;
	}
	if (target_has_it)
		return; /* served from here, shadowed there: Status shows the conflict; nothing is guessed */
	fs = partition_fs_get(m->pool, v->part);
	if (fs && !fs->read_only && mark(m, v, fs, "") == 0) {
		(void)store_save_index(m->store, v, VOLUME_INDEX_COMMITTED);
		log_info("volume %s: its evacuation was interrupted before its commit; it stays where it was", v->name);
	}
	partition_fs_put(fs);
}

void manager_evacuate_recover(Manager *m)
{
	Leftover shadows = { 0 }, marked = { 0 };

	registry_read_lock(m->reg);
	registry_foreach_shadow_locked(m->reg, NULL, collect_shadow, &shadows);
	for (size_t i = 0; i < registry_size_locked(m->reg); i++) {
		Volume *v = registry_at_locked(m->reg, i);
		Volume **nv;

		if (!v->evacuating_to[0] || v->index_only || !(nv = realloc(marked.v, (marked.n + 1) * sizeof(*nv))))
			continue;
		marked.v = nv;
		marked.v[marked.n++] = volume_ref(v);
	}
	registry_unlock(m->reg);
	for (size_t i = 0; i < shadows.n; i++) {
		finish(m, shadows.v[i]);
		volume_unref(shadows.v[i]);
	}
	for (size_t i = 0; i < marked.n; i++) {
		undo(m, marked.v[i]);
		volume_unref(marked.v[i]);
	}
	free(shadows.v);
	free(marked.v);
}
