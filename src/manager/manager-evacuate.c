/* SPDX-License-Identifier: MIT */
/*
 * Evacuate: every volume of a partition P moved to other partitions of this
 * host, each keeping its name, options, owner, limits (a new project ID on its
 * target T) and snapshots. P is cordoned first. Each volume travels in passes
 * (manager-evacuate-stage.h): a volume in use gets a live pass (no lock held
 * for long; its containers keep writing) and waits; a volume not in use gets
 * its final pass under create_lock and its op_lock (so no Mount runs
 * meanwhile), which carries only what changed since the last pass, then the
 * switch, in the order that keeps it whole on exactly one partition at every
 * instant:
 *   1. P's record gets "evacuating_to": T (the mark start-up recognises);
 *   2. the index entry names T, "pending" (as a Create's: a directory on T
 *      without a record goes to the trash at start);
 *   3. the staged snapshots move into T:snapshots/VOLUME (each with its
 *      record, ID included), the final tree to T:volumes/VOLUME, which gets a
 *      new project ID, its limits, and the ID on every file; synced;
 *   4. T's record is written: the commit point;
 *   5. the index entry names T, committed;
 *   6. P's directory and P's snapshots of it go to the trash, then P's record
 *      is deleted; the stage goes to the trash;
 *   7. the registry serves the new volume with its snapshots; a Mount that
 *      waited for the old one looks the name up again.
 * Start-up (manager_evacuate_recover): a served volume whose record on P
 * still has the mark and T has no record (a crash before 4): the mark is
 * cleared, the index names P again, T's snapshots of it and its stage go to
 * the trash (T's directory went with the pending entry); a shadow on P with
 * the mark next to the served record on T (a crash after 4): its directory,
 * its snapshots and its record go. A marked record whose T is missing is not
 * mounted until T is back. Then stages whose volume left are deleted.
 *
 * A partition that cannot share blocks (reflink=0) has no snapshots: its idle
 * volumes are copied directly and verified under a freeze of P (the clone
 * engine's copy path), and volumes in use wait without live passes.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clone/clone.h"
#include "manager/manager-evacuate-stage.h"
#include "pool/sizelimit.h"
#include "util/alloc-util.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/log.h"
#include "util/macro.h"


/* One evacuation at a time: its stages and snapshots have one writer. */
static pthread_mutex_t evacuate_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct Evacuation {
	Manager *m;
	Partition *src, *to; /* @to NULL: placement's choice per volume (or where its stage is) */
	PartitionFs *sfs;
	PartitionInfo sinfo;
	bool live;           /* give volumes in use a live pass */
	bool reflink;        /* P shares blocks: snapshots, live passes */
	json_t *moved, *waiting, *refused;
} Evacuation;

static void note(json_t *arr, const char *name, const char *why)
{
	json_array_append_new(arr, json_pack("{s:s,s:s}", "name", name, "why", why));
}

/* T for @volume: --to, else the partition that has its stage already, else placement's choice. */
static Partition *pick_target(Evacuation *e, const char *volume)
{
	Partition *p;

	if (e->to)
		return e->to;
	for (size_t i = 0; i < pool_size(e->m->pool); i++) {
		PartitionInfo info;

		p = pool_get(e->m->pool, i);
		if (!p || p == e->src)
			continue;
		partition_snapshot(e->m->pool, p, &info);
		/* One that takes no new volumes now is not the target, stage or not. */
		if (info.present && info.adopted && !info.cordon.on && evacuate_stage_held(e->m, p, volume, e->sinfo.uuid))
			return p;
	}
	p = pool_pick_most_free(e->m->pool);
	return p == e->src ? NULL : p;
}

/* Opens T for a pass of @v; the stage is opened by evacuate_pass_stage(). */
static int pass_target(Evacuation *e, EvacuatePass *p, Volume *v, char **reterr_msg)
{
	Manager *m = e->m;

	p->to = pick_target(e, v->name);
	if (!p->to)
		return errmsg_set(reterr_msg, -ENOSPC, "no other partition of this host takes new volumes (present, "
				  "adopted, not cordoned, with room): add one, or uncordon one");
	partition_snapshot(m->pool, p->to, &p->tinfo);
	partition_display_name(&p->tinfo, p->tname, sizeof(p->tname));
	p->tfs = partition_fs_get(m->pool, p->to);
	if (!p->tfs)
		return errmsg_set(reterr_msg, -ENODEV, "partition %s went away: %s", p->tname, p->tinfo.problem);
	return manager_check_target(m, p->to, p->tfs, &p->tinfo, p->tname, v->name, v->opts, reterr_msg);
}

/* ---- the live pass (the volume in use; no create_lock, op_lock only to take and drop snapshots) ---- */

typedef struct LiveArgs {
	Evacuation *e;
	EvacuatePass *p;
} LiveArgs;

static int live_take_fn(Manager *m, Volume *v, void *userdata, char **reterr_msg)
{
	LiveArgs *a = userdata;
	int r;

	if (v->part != a->e->src)
		return errmsg_set(reterr_msg, -ESTALE, "it left the partition meanwhile");
	r = pass_target(a->e, a->p, v, reterr_msg);
	if (r == 0)
		r = evacuate_pass_take(a->p, v, reterr_msg);
	return r;
}

static int live_end_fn(Manager *m, Volume *v, void *userdata, char **reterr_msg)
{
	LiveArgs *a = userdata;

	evacuate_drop_old_tops(m, v, evacuate_pass_staged_top(a->p));
	(void)reterr_msg;
	return 0;
}

static void live_pass(Evacuation *e, const char *name, const char *use)
{
	EvacuatePass p;
	LiveArgs a = { .e = e, .p = &p };
	_cleanup_free_ char *err = NULL;
	char why[PATH_MAX + 160];
	json_t *j;
	int r;

	evacuate_pass_init(&p, e->m, e->sfs, e->sinfo.uuid);
	r = manager_run_on_volume(e->m, name, false, live_take_fn, &a, &err);
	if (r == 0)
		r = evacuate_pass_stage(&p, &err);
	if (p.top.name[0]) {
		_cleanup_free_ char *ignored = NULL;
		(void)manager_run_on_volume(e->m, name, false, live_end_fn, &a, &ignored);
	}
	if (r < 0)
		snprintf(why, sizeof(why), "%s; its live pass failed: %s", use, err ? err : errno_str(r));
	else {
		snprintf(why, sizeof(why), "%s", use);
		log_info("volume %s: live pass to partition %s: %s, %" PRIu64 " bytes, %" PRIu64 " entries in %.1f ms "
			 "(%u snapshot(s) staged)", name, p.tname, p.full ? "full" : "incremental", p.bytes, p.entries,
			 p.us / 1000.0, p.moved_snaps);
	}
	j = json_pack("{s:s,s:s}", "name", name, "why", why);
	if (j && r == 0) {
		json_object_set_new(j, "to", json_string(p.tinfo.uuid));
		json_object_set_new(j, "pass", evacuate_pass_json(&p));
	}
	json_array_append_new(e->waiting, j);
	evacuate_pass_done(&p);
}

/* ---- the switch ---- */

/* The new volume: @v's record on @part, without a project ID (the target's own is given when its directory is made). */
static Volume *successor(const Volume *v, Partition *part, const PartitionInfo *info)
{
	Volume *nv = volume_new(v->name);

	if (!nv)
		return NULL;
	nv->state = VOLUME_READY;
	if (volume_set_options(nv, v->opts) < 0) {
		volume_unref(nv);
		return NULL;
	}
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
	char *old = v->evacuating_to, *new = to_uuid && *to_uuid ? strdup(to_uuid) : NULL;
	int r;

	if (to_uuid && *to_uuid && !new)
		return -ENOMEM;
	registry_write_lock(m->reg);
	v->evacuating_to = new;
	registry_unlock(m->reg);
	r = store_save_record(fs, v);
	registry_write_lock(m->reg);
	v->evacuating_to = r < 0 ? old : new;
	registry_unlock(m->reg);
	free(r < 0 ? new : old);
	return r;
}

/* Copies @v's tree on P straight into @nv's new directory on T, verified under a freeze of P (P without reflink). */
static int copy_direct(Evacuation *e, Volume *v, Volume *nv, PartitionFs *tfs, CloneStats *st, uint64_t *ret_need,
		       char **reterr_msg)
{
	Manager *m = e->m;
	_cleanup_close_ int sfd = -EBADF, dfd = -EBADF;
	_cleanup_free_ char *why = NULL;
	const FreezeMarker marker = { .dir_fd = store_freeze_dir(m->store), .name = e->sinfo.uuid };
	CloneParams p = { .freeze_budget_ms = (unsigned)m->cfg->clone_freeze_budget_ms, .allow_copy = true,
			  .other_fs = true, .mem_max = m->cfg->clone_memory_mb << 20, .freeze_fd = e->sfs->root_fd,
			  .freeze_marker = &marker, .writeback_wait_ms = CLONE_WRITEBACK_WAIT_MS };
	uint64_t need = 0, inodes = 0, free_b = 0;
	int r;

	sfd = openat(e->sfs->volumes_fd, v->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	dfd = openat(tfs->volumes_fd, nv->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sfd < 0 || dfd < 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot open volume %s on its partitions: %s", v->name,
				  errno_str(errno));
	r = clone_measure(sfd, &need, &inodes, &why);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot measure volume %s: %s", v->name, why ? why : errno_str(r));
	if (partition_fs_free_bytes(tfs, &free_b, NULL) == 0 && need > free_b)
		return errmsg_set(reterr_msg, -ENOSPC, "volume %s needs %llu bytes, the target has %llu free: free space "
				  "there, or name another with --to", v->name, (unsigned long long)need,
				  (unsigned long long)free_b);
	*ret_need = need;
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

/*
 * Steps 1-7 for @v (create_lock and op_lock held) to p->to: from the stage
 * (@p->top staged), or with @p NULL-staged (@direct) by a direct copy.
 */
static int switch_over(Evacuation *e, Volume *v, EvacuatePass *p, bool direct, CloneStats *st, char **reterr_msg)
{
	Manager *m = e->m;
	_cleanup_(volume_unrefp) Volume *nv = NULL;
	char entry[TRASH_ENTRY_MAX];
	bool made_dir = false, made_snaps = false, marked = false, indexed = false;
	int r;

	nv = successor(v, p->to, &p->tinfo);
	if (!nv)
		return errmsg_set(reterr_msg, -ENOMEM, "out of memory");
	marked = true;
	r = mark(m, v, e->sfs, p->tinfo.uuid); /* 1 */
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
	if (direct) { /* 3 */
		r = manager_make_volume_dir(m, nv, p->tfs, p->tname, &made_dir, reterr_msg);
		if (r == 0)
			r = copy_direct(e, v, nv, p->tfs, st, &p->bytes, reterr_msg);
	} else
		r = evacuate_pass_place(p, nv, &made_dir, &made_snaps, reterr_msg);
	if (r == 0 && (r = store_save_record(p->tfs, nv)) < 0) /* 4: the commit point */
		r = errmsg_set(reterr_msg, r, "cannot write the record of volume %s on partition %s: %s", v->name,
			       p->tname, errno_str(r));
	if (r < 0)
		goto out;

	/* Committed: whatever fails from here on is finished at the next start. */
	if (store_save_index(m->store, nv, VOLUME_INDEX_COMMITTED) < 0) /* 5 */
		log_warning("volume %s: cannot mark its index entry committed; start-up does", v->name);
	if (trash_move_in(e->sfs, e->sfs->volumes_fd, v->name, entry) == 0) { /* 6 */
		(void)trash_enqueue(m->trash, e->sfs, e->sinfo.uuid, entry);
		/* The record (the mark start-up finishes from) goes only after the snapshots: else they would stay. */
		if (e->sfs->snapshots_fd >= 0 &&
		    evacuate_discard(m, e->sfs, e->sinfo.uuid, e->sfs->snapshots_fd, v->name) < 0)
			log_warning("volume %s: cannot move its old snapshots on partition UUID %s to the trash; start-up "
				    "does", v->name, e->sinfo.uuid);
		else if (store_delete_record(e->sfs, v->name) < 0)
			log_warning("volume %s: cannot delete its old record on partition UUID %s; start-up does", v->name,
				    e->sinfo.uuid);
	} else
		log_warning("volume %s: cannot move its old directory on partition UUID %s to the trash; start-up does",
			    v->name, e->sinfo.uuid);
	if (!direct)
		evacuate_stage_drop(m, p->tfs, p->tinfo.uuid, v->name);
	manager_snapshot_load(m, nv, p->tfs, false);
	registry_write_lock(m->reg); /* 7 */
	v->removed = v->replaced = true;
	registry_remove_locked(m->reg, v);
	r = registry_insert_locked(m->reg, nv);
	registry_unlock(m->reg);
	if (r < 0)
		log_error("volume %s: moved to partition %s but cannot be registered (%s); restart the plugin", v->name,
			  p->tinfo.uuid, errno_str(r));
	sizelimit_commit_id(&m->projids, p->to, nv->projid);
	return 0;

out:
	/* Undo what this switch did, newest first: the volume stays on P, as it was. */
	if (made_dir || made_snaps) {
		evacuate_unplace(m, p->tfs, p->tinfo.uuid, v->name, made_dir, made_snaps);
		p->st.n = 0; /* the stage went with it */
	}
	sizelimit_release(&m->projids, p->to, p->tfs, nv->projid);
	/*
	 * The mark before the index entry: the entry is written from @v, so it would carry the mark otherwise
	 * (and keep it, as start-up goes by the record). Either way the entry then says what the record says.
	 */
	if (marked && mark(m, v, e->sfs, "") < 0)
		log_error("volume %s: cannot clear its evacuation mark (start-up does)", v->name);
	if (indexed && store_save_index(m->store, v, VOLUME_INDEX_COMMITTED) < 0)
		log_error("volume %s: cannot put its index entry back (start-up does)", v->name);
	return r;
}

/* ---- one volume of P ---- */

typedef struct VolumeArgs {
	Evacuation *e;
	bool in_use;
	char use[PATH_MAX + 128];
} VolumeArgs;

/*
 * Whether T already has what this volume's snapshots would become: an Err (before anything is written).
 * An empty snapshots/VOLUME (with at most empty meta/ and data/: a snapshot that failed early) holds
 * nothing of anyone's and is removed first.
 */
static int check_target_snapshots(EvacuatePass *p, char **reterr_msg)
{
	struct stat st;

	snapstore_prune(p->tfs, p->name);
	if (p->tfs->snapshots_fd >= 0 && fstatat(p->tfs->snapshots_fd, p->name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return errmsg_set(reterr_msg, -EEXIST, "partition %s has nvmevol/snapshots/%s, which no volume there "
				  "accounts for (a leftover, or copied there by hand): move it away and evacuate again",
				  p->tname, p->name);
	return 0;
}

/* The final pass of an idle volume and its switch (create_lock and op_lock held); or, in use, a note to wait. */
static int evacuate_fn(Manager *m, Volume *v, void *userdata, char **reterr_msg)
{
	VolumeArgs *a = userdata;
	Evacuation *e = a->e;
	EvacuatePass p;
	CloneStats st = { 0 };
	uint64_t t0 = freeze_now_us();
	bool mounted;
	int r;

	if (v->part != e->src)
		return 0; /* moved or replaced meanwhile */
	evacuate_pass_init(&p, m, e->sfs, e->sinfo.uuid);
	if (v->corrupt)
		return errmsg_set(reterr_msg, -EUCLEAN, "its record is unreadable (%s)", v->corrupt);
	registry_read_lock(m->reg);
	mounted = v->mounted;
	registry_unlock(m->reg);
	if (manager_volume_known_in_use(v, e->sfs, mounted, a->use, sizeof(a->use))) {
		a->in_use = true;
		return 0;
	}
	for (size_t i = 0; i < v->n_snaps; i++)
		if (v->snaps[i].temporary) {
			snprintf(a->use, sizeof(a->use), "an export of it is running (snapshot %s)", v->snaps[i].name);
			a->in_use = true;
			return 0;
		}
	if (!e->reflink && v->n_snaps > 0)
		return errmsg_set(reterr_msg, -EOPNOTSUPP, "it has snapshots on a partition without reflink: remove them");
	r = pass_target(e, &p, v, reterr_msg);
	if (r == 0) {
		snprintf(p.name, sizeof(p.name), "%s", v->name);
		r = check_target_snapshots(&p, reterr_msg);
	}
	if (r == 0 && e->reflink) {
		/* The final snapshot: the volume as it is now (no Mount can run meanwhile), staged on the last pass. */
		r = evacuate_pass_take(&p, v, reterr_msg);
		if (r == 0)
			r = evacuate_pass_stage(&p, reterr_msg);
		if (r == 0)
			r = switch_over(e, v, &p, false, &st, reterr_msg);
		if (r < 0 && p.top.name[0])
			evacuate_drop_old_tops(m, v, evacuate_pass_staged_top(&p));
	} else if (r == 0)
		r = switch_over(e, v, &p, true, &st, reterr_msg);
	if (r == 0) {
		size_t kept = 0;
		json_t *j;

		for (size_t i = 0; i < p.n; i++)
			kept += evacuate_snapshot_moves(&p.snaps[i]);
		if (!e->reflink) {
			p.full = true;
			p.entries = st.files + st.dirs + st.symlinks + st.specials + st.hardlinks;
			p.us = st.elapsed_us;
			p.top.frozen_ms = (uint32_t)((st.frozen_us + 999) / 1000);
		}
		log_info("volume %s: evacuated from partition UUID %s to %s (UUID %s): final pass %s, %" PRIu64 " bytes, "
			 "%" PRIu64 " entries in %.1f ms, %u ms frozen; %zu snapshot(s) moved; switched in %.1f ms", v->name,
			 e->sinfo.uuid, p.tname, p.tinfo.uuid, p.full ? "full" : "incremental", p.bytes, p.entries,
			 p.us / 1000.0, p.top.frozen_ms, kept, (freeze_now_us() - t0) / 1000.0);
		j = json_pack("{s:s,s:s,s:I,s:I,s:I,s:I}", "name", v->name, "to", p.tinfo.uuid, "bytes", (json_int_t)p.bytes,
			      "entries", (json_int_t)p.entries, "frozen_ms", (json_int_t)p.top.frozen_ms, "downtime_ms",
			      (json_int_t)((freeze_now_us() - t0 + 999) / 1000));
		if (j) {
			json_object_set_new(j, "final_pass", evacuate_pass_json(&p));
			json_object_set_new(j, "snapshots", json_integer((json_int_t)kept));
		}
		json_array_append_new(e->moved, j);
	}
	evacuate_pass_done(&p);
	return r;
}

int manager_partition_evacuate(Manager *m, const char *ref, const char *to, bool live, json_t **ret_result,
			       char **reterr_msg)
{
	Evacuation e = { .m = m, .live = live };
	PartitionCordon c = { .on = true, .by = CORDON_BY_ADMIN, .since = (int64_t)time(NULL) };
	PartitionDevice dev;
	char **names = NULL;
	size_t n = 0;
	int r;

	pthread_mutex_lock(&evacuate_lock);
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
	partition_device_snapshot(m->pool, e.src, &dev);
	e.reflink = !(dev.has_xfs && !dev.xfs.reflink);
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
	if (e.sfs->read_only) {
		r = errmsg_set(reterr_msg, -EROFS, "partition %s is read-only until adopted ('nvmevol partition adopt %s'): "
			       "its volumes cannot be evacuated before", ref, ref);
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
	pthread_mutex_unlock(&m->create_lock);

	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *err = NULL;
		VolumeArgs a = { .e = &e };

		/* Each idle volume under create_lock and its op_lock; a live pass under neither for long. */
		if (manager_run_on_volume(m, names[i], true, evacuate_fn, &a, &err) < 0)
			note(e.refused, names[i], err ? err : "failed");
		else if (a.in_use && e.live && e.reflink)
			live_pass(&e, names[i], a.use);
		else if (a.in_use)
			note(e.waiting, names[i], a.use);
	}
	*ret_result = json_pack("{s:s,s:O,s:O,s:O}", "partition", e.sinfo.uuid, "moved", e.moved, "waiting", e.waiting,
				"refused", e.refused);
	r = *ret_result ? 0 : -ENOMEM;
	goto out;
unlock:
	pthread_mutex_unlock(&m->create_lock);
out:
	pthread_mutex_unlock(&evacuate_lock);
	names_free(names, n);
	partition_fs_put(e.sfs);
	json_decref(e.moved);
	json_decref(e.waiting);
	json_decref(e.refused);
	return r;
}

int manager_evacuate_check_mount(const Volume *v, char **reterr_msg)
{
	if (!v->evacuating_to)
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

	if (!shadow->evacuating_to || !(nv = realloc(l->v, (l->n + 1) * sizeof(*nv))))
		return;
	l->v = nv;
	l->v[l->n++] = volume_ref(shadow);
}

/* A shadow on P with the mark, its volume served from T: the evacuation was committed; P's copy goes. */
static void finish(Manager *m, Volume *s)
{
	_cleanup_(volume_unrefp) Volume *served = registry_lookup(m->reg, s->name);
	PartitionFs *fs, *tfs;
	PartitionInfo info;
	char entry[TRASH_ENTRY_MAX];

	if (!served || !streq(served->partition_uuid, s->evacuating_to))
		return; /* not the evacuation's target that is served: a real conflict, left alone */
	fs = partition_fs_get(m->pool, s->part);
	partition_snapshot(m->pool, s->part, &info);
	if (fs && !fs->read_only) {
		if (trash_move_in(fs, fs->volumes_fd, s->name, entry) == 0)
			(void)trash_enqueue(m->trash, fs, info.uuid, entry);
		/* The record last, and only once the snapshots went: it is what brings this back at the next start. */
		if ((fs->snapshots_fd < 0 || evacuate_discard(m, fs, info.uuid, fs->snapshots_fd, s->name) == 0) &&
		    store_delete_record(fs, s->name) == 0) {
			registry_write_lock(m->reg);
			registry_remove_shadow_locked(m->reg, s);
			registry_unlock(m->reg);
			log_info("volume %s: its evacuation to partition UUID %s was interrupted after its commit; the old "
				 "copy on partition UUID %s is deleted", s->name, s->evacuating_to, info.uuid);
		}
	}
	partition_fs_put(fs);
	tfs = served->index_only ? NULL : partition_fs_get(m->pool, served->part);
	if (tfs && !tfs->read_only)
		evacuate_stage_drop(m, tfs, served->partition_uuid, s->name);
	partition_fs_put(tfs);
}

/* A served volume still marked: a crash before the commit (T has no record), undone; or T is missing, kept marked. */
static void undo(Manager *m, Volume *v)
{
	Partition *to = pool_find_uuid(m->pool, v->evacuating_to);
	PartitionFs *fs, *tfs = to ? partition_fs_get(m->pool, to) : NULL;
	bool target_has_it = tfs && store_has_record(tfs, v->name);

	if (!tfs) {
		log_error("volume %s: its evacuation to partition UUID %s was interrupted and that partition is missing; "
			  "not mounted until it is back", v->name, v->evacuating_to);
		return;
	}
	if (target_has_it) {
		partition_fs_put(tfs);
		return; /* served from here, shadowed there: Status shows the conflict; nothing is guessed */
	}
	/* Before T's record, T's snapshots of it and its stage are this evacuation's (nothing else makes them). */
	if (!tfs->read_only)
		evacuate_unplace(m, tfs, v->evacuating_to, v->name, false, true);
	partition_fs_put(tfs);
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

		if (!v->evacuating_to || v->index_only || !(nv = realloc(marked.v, (marked.n + 1) * sizeof(*nv))))
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
	evacuate_sweep_stages(m);
}
