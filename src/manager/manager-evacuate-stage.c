/* SPDX-License-Identifier: MIT */
/* An evacuation's passes and stage (manager-evacuate-stage.h). */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clone/clone.h"
#include "manager/manager-evacuate-stage.h"
#include "pool/sizelimit.h"
#include "stream/tree-apply.h"
#include "util/alloc-util.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/log.h"
#include "util/macro.h"

#define STAGE_ROOT ".evacuating" /* in the target's nvmevol/snapshots: no volume's name starts with '.' */
#define STAGE_STATE "state.json"
#define STAGE_STATE_MAX (64u * 1024)
#define STAGE_VERSION 1
#define EVACUATION_SNAPSHOT_PREFIX "evacuate-"
#define STAGE_NULL ((Stage){ .root_fd = -EBADF, .fd = -EBADF })

/* ---- the stage on T ---- */




static void stage_done(Stage *s)
{
	if (s->root_fd >= 0)
		(void)close(s->root_fd);
	if (s->fd >= 0)
		(void)close(s->fd);
	free(s->trees);
	*s = STAGE_NULL;
}

static StagedTree *stage_find(Stage *s, const char *id)
{
	for (size_t i = 0; i < s->n; i++)
		if (streq(s->trees[i].id, id))
			return &s->trees[i];
	return NULL;
}

static void stage_unlist(Stage *s, const char *id)
{
	StagedTree *t = stage_find(s, id);

	if (t)
		*t = s->trees[--s->n];
}

static int stage_list(Stage *s, const VolumeSnapshot *snap, bool live)
{
	StagedTree *n = realloc(s->trees, (s->n + 1) * sizeof(*n));

	if (!n)
		return -ENOMEM;
	s->trees = n;
	n = &s->trees[s->n++];
	*n = (StagedTree){ .live = live };
	snprintf(n->snapshot, sizeof(n->snapshot), "%s", snap->name);
	snprintf(n->id, sizeof(n->id), "%s", snap->id);
	return 0;
}

/* Reads state.json; anything unreadable or unexpected leaves an empty, unowned stage (rebuilt). */
static void stage_load(Stage *s)
{
	_cleanup_free_ char *buf = NULL;
	json_t *j, *t;
	size_t len = 0, i;

	if (read_file_at(s->fd, STAGE_STATE, STAGE_STATE_MAX, &buf, &len) < 0)
		return;
	j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
	if (!j || json_integer_value(json_object_get(j, "version")) != STAGE_VERSION ||
	    !json_is_string(json_object_get(j, "from")) || !json_is_integer(json_object_get(j, "created_at")) ||
	    !json_is_array(json_object_get(j, "trees"))) {
		json_decref(j);
		return;
	}
	json_array_foreach(json_object_get(j, "trees"), i, t) {
		const char *name = json_string_value(json_object_get(t, "snapshot")),
			   *id = json_string_value(json_object_get(t, "id"));
		VolumeSnapshot snap = { 0 };

		if (!name || !id || !volume_name_is_valid(name) || !snapshot_id_is_valid(id) ||
		    !json_is_boolean(json_object_get(t, "live"))) {
			s->n = 0;
			json_decref(j);
			return;
		}
		snprintf(snap.name, sizeof(snap.name), "%s", name);
		snprintf(snap.id, sizeof(snap.id), "%s", id);
		if (stage_list(s, &snap, json_is_true(json_object_get(t, "live"))) < 0)
			break;
	}
	snprintf(s->from, sizeof(s->from), "%s", json_string_value(json_object_get(j, "from")));
	s->created_at = (int64_t)json_integer_value(json_object_get(j, "created_at"));
	json_decref(j);
}

static int stage_save(Stage *s, const char *volume)
{
	_cleanup_free_ char *text = NULL;
	json_t *j, *arr = json_array();

	for (size_t i = 0; arr && i < s->n; i++)
		json_array_append_new(arr, json_pack("{s:s,s:s,s:b}", "snapshot", s->trees[i].snapshot, "id",
						     s->trees[i].id, "live", s->trees[i].live));
	j = arr ? json_pack("{s:i,s:s,s:s,s:I,s:o}", "version", STAGE_VERSION, "volume", volume, "from", s->from,
			    "created_at", (json_int_t)s->created_at, "trees", arr) : NULL;
	text = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(j);
	if (!text)
		return -ENOMEM;
	return write_file_atomic_at(s->fd, STAGE_STATE, text, strlen(text), 0600);
}

/* Moves @name of @dirfd on @fs to the trash and queues it. */
int evacuate_discard(Manager *m, PartitionFs *fs, const char *uuid, int dirfd, const char *name)
{
	char entry[TRASH_ENTRY_MAX];
	int r = trash_move_in(fs, dirfd, name, entry);

	if (r == -ENOENT)
		return 0; /* nothing there */
	if (r < 0)
		return r;
	(void)fsync(fs->trash_fd);
	(void)fsync(dirfd);
	(void)trash_enqueue(m->trash, fs, uuid, entry);
	return 0;
}

/* Opens the stage of @volume on @fs (made if @create); state.json read. -ENOENT: none and !@create. */
static int stage_open(PartitionFs *fs, const char *volume, bool create, Stage *ret)
{
	Stage s = STAGE_NULL;
	bool made = false;
	int r;

	if (fs->snapshots_fd < 0)
		return -ENOENT;
	r = pool_open_subdir(fs->snapshots_fd, STAGE_ROOT, 0700, fs->dev, create, &made);
	if (r < 0)
		return r;
	s.root_fd = r;
	r = pool_open_subdir(s.root_fd, volume, 0700, fs->dev, create, &made);
	if (r < 0) {
		stage_done(&s);
		return r;
	}
	s.fd = r;
	if (made)
		(void)fsync(s.root_fd);
	stage_load(&s);
	*ret = s;
	return 0;
}

/* The stage of @volume on @fs, whole, to the trash. */
void evacuate_stage_drop(Manager *m, PartitionFs *fs, const char *uuid, const char *volume)
{
	_cleanup_close_ int root = -EBADF;

	if (fs->snapshots_fd < 0)
		return;
	root = openat(fs->snapshots_fd, STAGE_ROOT, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (root < 0)
		return;
	evacuate_discard(m, fs, uuid, root, volume);
	if (unlinkat(fs->snapshots_fd, STAGE_ROOT, AT_REMOVEDIR) == 0)
		(void)fsync(fs->snapshots_fd);
}

/* Whether partition @part has a stage of @volume from partition @from. */
bool evacuate_stage_held(Manager *m, Partition *part, const char *volume, const char *from)
{
	PartitionFs *fs = partition_fs_get(m->pool, part);
	Stage s = STAGE_NULL;
	bool yes = false;

	if (fs && !fs->read_only && stage_open(fs, volume, false, &s) == 0) {
		yes = streq(s.from, from) && s.n > 0;
		stage_done(&s);
	}
	partition_fs_put(fs);
	return yes;
}

/* ---- a pass: the volume's snapshots and one more tree staged on T ---- */


void evacuate_pass_init(EvacuatePass *p, Manager *m, PartitionFs *sfs, const char *from)
{
	*p = (EvacuatePass){ .m = m, .sfs = sfs, .st = STAGE_NULL, .src = SNAPDIR_NULL };
	snprintf(p->from, sizeof(p->from), "%s", from);
}

void evacuate_pass_done(EvacuatePass *p)
{
	free(p->snaps);
	p->snaps = NULL;
	stage_done(&p->st);
	snapdir_done(&p->src);
	partition_fs_put(p->tfs);
	p->tfs = NULL;
}

static int snap_order(const void *a, const void *b)
{
	const VolumeSnapshot *x = a, *y = b;

	return x->at != y->at ? (x->at < y->at ? -1 : 1) : strcmp(x->name, y->name);
}

/* Whether @s is one of the volume's own snapshots, to be moved with it. */
bool evacuate_snapshot_moves(const VolumeSnapshot *s)
{
	return !s->evacuation && !s->temporary && s->state == SNAPSHOT_COMMITTED;
}

/* Copies @v's snapshot list, oldest first (op_lock held). */
static int copy_snaps(EvacuatePass *p, Volume *v)
{
	p->snaps = calloc(v->n_snaps + 1, sizeof(*p->snaps));
	if (!p->snaps)
		return -ENOMEM;
	memcpy(p->snaps, v->snaps, v->n_snaps * sizeof(*p->snaps));
	p->n = v->n_snaps;
	qsort(p->snaps, p->n, sizeof(*p->snaps), snap_order);
	return 0;
}

static const VolumeSnapshot *snap_by_id(const EvacuatePass *p, const char *id)
{
	for (size_t i = 0; i < p->n; i++)
		if (streq(p->snaps[i].id, id))
			return &p->snaps[i];
	return streq(p->top.id, id) ? &p->top : NULL;
}

/*
 * The stage, made to belong to this volume of P: a stage of another (a namesake,
 * another source) is discarded; trees whose snapshot left P and directories no
 * tree lists (a pass interrupted) go to the trash.
 */
static int stage_prepare(EvacuatePass *p)
{
	Manager *m = p->m;
	char **names = NULL;
	uint64_t mem = 0;
	size_t n = 0;
	int r;

	r = stage_open(p->tfs, p->name, true, &p->st);
	if (r < 0)
		return r;
	if (!streq(p->st.from, p->from) || p->st.created_at != p->created_at) {
		if (p->st.from[0] || p->st.n)
			log_info("volume %s: the evacuation stage on partition UUID %s is another volume's; rebuilt",
				 p->name, p->tinfo.uuid);
		p->st.n = 0;
		snprintf(p->st.from, sizeof(p->st.from), "%s", p->from);
		p->st.created_at = p->created_at;
	}
	for (size_t i = 0; i < p->st.n;)
		if (!snap_by_id(p, p->st.trees[i].id) || streq(p->st.trees[i].id, p->top.id))
			p->st.trees[i] = p->st.trees[--p->st.n];
		else
			i++;
	r = stage_save(&p->st, p->name);
	if (r < 0)
		return r;
	/* A stage holds a few trees and state.json (and, after a crash, its temp files: they go). */
	(void)remove_atomic_tmp_files(p->st.fd);
	r = dir_read_names(p->st.fd, false, &mem, 1u << 20, &names, &n);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		if (!streq(names[i], STAGE_STATE) && names[i][0] != '.' && !stage_find(&p->st, names[i]))
			evacuate_discard(m, p->tfs, p->tinfo.uuid, p->st.fd, names[i]);
	names_free(names, n);
	return 0;
}

/*
 * The newest staged tree whose snapshot is older than @x on P, or NULL. The
 * pass's own snapshot (P's top) was just taken: every other is older, even one
 * of the same second (snapshot times are seconds; their names would order the
 * previous pass's evacuate-2 after this one's evacuate-1 and make it a full pass).
 */
static StagedTree *stage_base(EvacuatePass *p, const VolumeSnapshot *x)
{
	StagedTree *best = NULL;
	const VolumeSnapshot *bs = NULL;

	for (size_t i = 0; i < p->st.n; i++) {
		const VolumeSnapshot *s = snap_by_id(p, p->st.trees[i].id);

		if (s && s != x && (x == &p->top || snap_order(s, x) < 0) && (!bs || snap_order(s, bs) > 0)) {
			best = &p->st.trees[i];
			bs = s;
		}
	}
	return best;
}

static int open_dir(int dirfd, const char *name)
{
	return openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/*
 * Stages snapshot @x of P: from its base's tree on T (in place when both are
 * live, else a block-sharing copy of it) changed by the difference on P, or a
 * full copy without a base. Listed in state.json once whole.
 */
static int stage_tree(EvacuatePass *p, const VolumeSnapshot *x, bool live, char **reterr_msg)
{
	Manager *m = p->m;
	_cleanup_close_ int xfd = -EBADF, bfd = -EBADF, dfd = -EBADF;
	_cleanup_free_ char *why = NULL;
	StagedTree *base = stage_base(p, x);
	const VolumeSnapshot *bs = base ? snap_by_id(p, base->id) : NULL;
	uint64_t t0 = freeze_now_us(), free_b = 0;
	int r;

	xfd = open_dir(p->src.data_fd, x->name);
	if (xfd < 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot open snapshot %s of volume %s: %s", x->name,
				  p->name, errno_str(errno));
	if (bs && (bfd = open_dir(p->src.data_fd, bs->name)) < 0)
		base = NULL; /* its snapshot went meanwhile: a full copy */
	if (!base) {
		CloneStats cs = { 0 };
		CloneParams cp = { .src_fd = xfd, .freeze_fd = -EBADF, .allow_copy = true, .other_fs = true,
				   .mem_max = m->cfg->clone_memory_mb << 20 };
		uint64_t need = 0, inodes = 0;

		/* Room for it, as a clear Err before anything is written (a copy shares no blocks). */
		r = clone_measure(xfd, &need, &inodes, &why);
		if (r < 0)
			return errmsg_set(reterr_msg, r, "cannot measure volume %s: %s", p->name, why ? why : errno_str(r));
		if (partition_fs_free_bytes(p->tfs, &free_b, NULL) == 0 && need > free_b)
			return errmsg_set(reterr_msg, -ENOSPC, "volume %s needs %llu bytes, partition %s has %llu free: "
					  "free space there, or name another with --to", p->name, (unsigned long long)need,
					  p->tname, (unsigned long long)free_b);
		if (mkdirat(p->st.fd, x->id, 0700) < 0 || (dfd = open_dir(p->st.fd, x->id)) < 0)
			return errmsg_set(reterr_msg, negative_errno(), "cannot make the evacuation's directory on partition "
					  "%s: %s", p->tname, errno_str(errno));
		cp.dst_fd = dfd;
		r = clone_tree(&cp, &cs, &why);
		if (r < 0)
			return errmsg_set(reterr_msg, r, "cannot copy volume %s: %s", p->name, why ? why : errno_str(r));
		p->full = true;
		p->bytes += need; /* allocated: what was copied (holes are not) */
		p->entries = cs.files + cs.dirs + cs.symlinks + cs.specials + cs.hardlinks;
	} else {
		RecvLimits lim = { .max_bytes = UINT64_MAX, .max_records = UINT64_MAX, .allow_devices = true };
		TreeApplyStats ts = { 0 };

		if (base->live && live) {
			/* Changed in place: unlisted first, so that an interrupted pass leaves nothing half-built listed. */
			char was[SNAPSHOT_ID_LEN + 1];

			snprintf(was, sizeof(was), "%s", base->id);
			stage_unlist(&p->st, was);
			r = stage_save(&p->st, p->name);
			if (r < 0)
				return errmsg_set(reterr_msg, r, "cannot write the evacuation's state: %s", errno_str(r));
			if (renameat(p->st.fd, was, p->st.fd, x->id) < 0 || (dfd = open_dir(p->st.fd, x->id)) < 0)
				return errmsg_set(reterr_msg, negative_errno(), "cannot rename the evacuation's directory: %s",
						  errno_str(errno));
		} else {
			_cleanup_close_ int tb = open_dir(p->st.fd, base->id);
			CloneStats cs = { 0 };
			CloneParams cp = { .src_fd = tb, .freeze_fd = -EBADF, .allow_copy = true,
					   .mem_max = m->cfg->clone_memory_mb << 20 };

			if (tb < 0 || mkdirat(p->st.fd, x->id, 0700) < 0 || (dfd = open_dir(p->st.fd, x->id)) < 0)
				return errmsg_set(reterr_msg, negative_errno(), "cannot make the evacuation's directory on "
						  "partition %s: %s", p->tname, errno_str(errno));
			/* Nothing writes a staged tree: no freeze; blocks shared on T as on P. */
			cp.dst_fd = dfd;
			r = clone_tree(&cp, &cs, &why);
			if (r < 0)
				return errmsg_set(reterr_msg, r, "cannot copy the staged tree of %s: %s", base->snapshot,
						  why ? why : errno_str(r));
		}
		if (partition_fs_free_bytes(p->tfs, &free_b, NULL) == 0)
			lim.max_bytes = free_b;
		r = tree_apply_changes(xfd, bfd, dfd, &lim, &ts, &why);
		if (r < 0)
			return errmsg_set(reterr_msg, r, "cannot carry the changes of volume %s since %s: %s", p->name,
					  bs->name, why ? why : errno_str(r));
		p->bytes += ts.data_bytes;
		p->entries = ts.entries;
	}
	p->us += freeze_now_us() - t0;
	r = stage_list(&p->st, x, live);
	if (r == 0)
		r = stage_save(&p->st, p->name);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot write the evacuation's state: %s", errno_str(r));
	return 0;
}

/*
 * Stages every snapshot of the volume not staged yet, oldest first, then the
 * pass's own (@p->top, taken already), live. On failure the stage keeps what
 * was listed.
 */
int evacuate_pass_stage(EvacuatePass *p, char **reterr_msg)
{
	PartitionFs *sfs = p->sfs;
	int r;

	r = snapstore_open(sfs, p->name, false, &p->src);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot open nvmevol/snapshots/%s on partition UUID %s: %s", p->name,
				  p->from, errno_str(r));
	r = stage_prepare(p);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot prepare nvmevol/snapshots/" STAGE_ROOT "/%s on partition %s: %s",
				  p->name, p->tname, errno_str(r));
	for (size_t i = 0; i < p->n; i++) {
		if (!evacuate_snapshot_moves(&p->snaps[i]) || stage_find(&p->st, p->snaps[i].id))
			continue;
		if (p->snaps[i].data_missing || !p->snaps[i].id[0])
			return errmsg_set(reterr_msg, -EINVAL, "its snapshot %s %s: remove it ('nvmevol volume snapshot-rm "
					  "%s %s') to evacuate the volume", p->snaps[i].name,
					  p->snaps[i].data_missing ? "has lost its data" : "has no ID (an older nvmevol's)",
					  p->name, p->snaps[i].name);
		r = stage_tree(p, &p->snaps[i], false, reterr_msg);
		if (r < 0)
			return r;
		p->moved_snaps++;
	}
	return stage_tree(p, &p->top, true, reterr_msg);
}

/* A free name evacuate-N for the pass's snapshot of @v. */
static void top_name(Volume *v, char *buf, size_t len)
{
	for (unsigned i = 1;; i++) {
		bool taken = false;

		snprintf(buf, len, EVACUATION_SNAPSHOT_PREFIX "%u", i);
		for (size_t k = 0; k < v->n_snaps && !taken; k++)
			taken = streq(v->snaps[k].name, buf);
		if (!taken)
			return;
	}
}

/* Takes the pass's snapshot of @v (op_lock held) and copies the list. */
int evacuate_pass_take(EvacuatePass *p, Volume *v, char **reterr_msg)
{
	char snap[VOLUME_NAME_MAX + 1];
	int r;

	top_name(v, snap, sizeof(snap));
	r = manager_snapshot_take_for_evacuation(p->m, v, snap, &p->top, reterr_msg);
	if (r < 0)
		return r;
	p->created_at = v->created_at;
	snprintf(p->name, sizeof(p->name), "%s", v->name);
	return copy_snaps(p, v);
}

/* Removes @v's evacuation snapshots but @keep (op_lock held). */
void evacuate_drop_old_tops(Manager *m, Volume *v, const char *keep)
{
	char names[SNAPSHOTS_PER_VOLUME_MAX][VOLUME_NAME_MAX + 1];
	size_t n = 0;

	for (size_t i = 0; i < v->n_snaps && n < SNAPSHOTS_PER_VOLUME_MAX; i++)
		if (v->snaps[i].evacuation && (!keep || !streq(v->snaps[i].name, keep)))
			snprintf(names[n++], sizeof(names[0]), "%s", v->snaps[i].name);
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *err = NULL;

		if (manager_snapshot_remove_locked(m, v, names[i], &err) < 0)
			log_warning("volume %s: cannot remove the evacuation's snapshot %s: %s", v->name, names[i],
				    err ? err : "?");
	}
}

/*
 * The evacuation snapshot to keep: the one the stage's live tree shows (the
 * next pass's base; this pass's own once it is staged), or none.
 */
const char *evacuate_pass_staged_top(const EvacuatePass *p)
{
	for (size_t i = 0; i < p->st.n; i++)
		if (p->st.trees[i].live)
			return p->st.trees[i].snapshot;
	return NULL;
}

json_t *evacuate_pass_json(const EvacuatePass *p)
{
	return json_pack("{s:s,s:s,s:I,s:I,s:I,s:I,s:I}", "kind", p->full ? "full" : "incremental", "snapshot",
			 p->top.name, "bytes", (json_int_t)p->bytes, "entries", (json_int_t)p->entries, "ms",
			 (json_int_t)((p->us + 999) / 1000), "frozen_ms", (json_int_t)p->top.frozen_ms, "snapshots_staged",
			 (json_int_t)p->moved_snaps);
}

/* Step 3 for the staged trees: the snapshots into T:snapshots/VOLUME, the final tree to T:volumes/VOLUME. */
int evacuate_pass_place(EvacuatePass *p, Volume *nv, bool *made_dir, bool *made_snaps, char **reterr_msg)
{
	Manager *m = p->m;
	_cleanup_close_ int dfd = -EBADF;
	SnapDir d = SNAPDIR_NULL;
	uint64_t tagged = 0;
	int r = 0;

	for (size_t i = 0; i < p->n && r == 0; i++) {
		VolumeSnapshot s = p->snaps[i];

		if (!evacuate_snapshot_moves(&s))
			continue;
		if (d.vol_fd < 0) {
			*made_snaps = true;
			r = snapstore_open(p->tfs, p->name, true, &d);
			if (r < 0) {
				r = errmsg_set(reterr_msg, r, "cannot make nvmevol/snapshots/%s on partition %s: %s", p->name,
					       p->tname, errno_str(r));
				break;
			}
		}
		if (renameat2(p->st.fd, s.id, d.data_fd, s.name, RENAME_NOREPLACE) < 0) {
			r = errmsg_set(reterr_msg, negative_errno(), "cannot move the staged snapshot %s into place: %s",
				       s.name, errno_str(errno));
			break;
		}
		s.cost_known = false;
		s.state = SNAPSHOT_COMMITTED;
		r = snapstore_save(&d, p->name, &s);
		if (r < 0)
			r = errmsg_set(reterr_msg, r, "cannot write the record of snapshot %s on partition %s: %s", s.name,
				       p->tname, errno_str(r));
	}
	if (r == 0 && d.vol_fd >= 0 && (fsync(d.data_fd) < 0 || fsync(d.meta_fd) < 0))
		r = errmsg_set(reterr_msg, negative_errno(), "cannot sync the snapshots: %s", errno_str(errno));
	snapdir_done(&d);
	if (r < 0)
		return r;
	*made_dir = true;
	if (renameat2(p->st.fd, p->top.id, p->tfs->volumes_fd, p->name, RENAME_NOREPLACE) < 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot move the staged volume into volumes/%s: %s",
				  p->name, errno_str(errno));
	dfd = open_dir(p->tfs->volumes_fd, p->name);
	if (dfd < 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot open volumes/%s: %s", p->name, errno_str(errno));
	r = sizelimit_apply_new(&m->projids, m->reg, p->tfs, nv, dfd, reterr_msg);
	/* As root (CAP_FOWNER): the charge may pass a hard limit, as a rollback's copy's does. */
	if (r == 0 && nv->projid)
		r = sizelimit_tag_tree(p->tfs, dfd, nv->projid, &tagged, reterr_msg);
	if (r == 0 && (fsync(p->tfs->volumes_fd) < 0 || syncfs(dfd) < 0))
		r = errmsg_set(reterr_msg, negative_errno(), "cannot sync partition %s: %s", p->tname, errno_str(errno));
	return r;
}

/* Trashes what step 3 placed on T and the stage (an undo, in process or at start). */
void evacuate_unplace(Manager *m, PartitionFs *tfs, const char *tuuid, const char *name, bool made_dir, bool made_snaps)
{
	if (made_dir)
		evacuate_discard(m, tfs, tuuid, tfs->volumes_fd, name);
	if (made_snaps && tfs->snapshots_fd >= 0)
		evacuate_discard(m, tfs, tuuid, tfs->snapshots_fd, name);
	evacuate_stage_drop(m, tfs, tuuid, name);
}

/* Stages whose volume is no longer served from the stage's source (moved, removed, a namesake): deleted. */
void evacuate_sweep_stages(Manager *m)
{
	for (size_t i = 0; i < pool_size(m->pool); i++) {
		Partition *part = pool_get(m->pool, i);
		PartitionFs *fs = part ? partition_fs_get(m->pool, part) : NULL;
		_cleanup_close_ int root = -EBADF;
		PartitionInfo info;
		char **names = NULL;
		uint64_t mem = 0;
		size_t n = 0;

		if (fs && !fs->read_only && fs->snapshots_fd >= 0)
			root = open_dir(fs->snapshots_fd, STAGE_ROOT);
		if (root >= 0 && dir_read_names(root, false, &mem, 16u << 20, &names, &n) == 0) {
			partition_snapshot(m->pool, part, &info);
			for (size_t k = 0; k < n; k++) {
				_cleanup_(volume_unrefp) Volume *v = NULL;
				Stage st = STAGE_NULL;
				bool keep = false;

				if (volume_name_is_valid(names[k]) && stage_open(fs, names[k], false, &st) == 0) {
					v = registry_lookup(m->reg, names[k]);
					keep = v && streq(v->partition_uuid, st.from) && v->created_at == st.created_at;
					stage_done(&st);
				}
				if (keep)
					continue;
				log_info("partition UUID %s: deleting the evacuation stage nvmevol/snapshots/" STAGE_ROOT "/%s: "
					 "its volume is no longer on the partition it came from", info.uuid, names[k]);
				evacuate_discard(m, fs, info.uuid, root, names[k]);
			}
			names_free(names, n);
			if (unlinkat(fs->snapshots_fd, STAGE_ROOT, AT_REMOVEDIR) == 0)
				(void)fsync(fs->snapshots_fd);
		}
		partition_fs_put(fs);
	}
}
