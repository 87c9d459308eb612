/* SPDX-License-Identifier: MIT */
/*
 * Receive: where the records of `nvmevol volume receive` are applied, and
 * their commit. A full stream is an import (manager-import.c: a directory in
 * nvmevol/imports/ that becomes a new volume through Create's commit order).
 * An incremental one is applied to a block-sharing copy of its base snapshot
 * (found by the sender's ID) in nvmevol/snapshots/VOLUME/receive-TOKEN,
 * bound read-write, nosuid, nodev at <PropagatedMount>/.receive-TOKEN for
 * the command; the commit, under the volume's op_lock and refused while it
 * is known to be in use, is one renameat2(RENAME_EXCHANGE) with
 * volumes/VOLUME, as a rollback's; the previous state, then in receive-TOKEN,
 * goes to the trash. Before the exchange the volume is untouched; whatever
 * is in receive-* is never the live volume, so start-up deletes it unasked.
 *
 * A receive is the state and its snapshot or nothing, across a crash too.
 * The stream's snapshot (the sender's ID) is taken before the commit, of the
 * received tree (receive-TOKEN; a full stream's new volumes/VOLUME after its
 * copy and before its record, through a CreateHook), its record marked with
 * that tree's root inode (receive_root, snapshot.h); then the commit; then
 * the mark is cleared, one atomic record rewrite, and the snapshot listed.
 * A crash in between leaves a marked record, which start-up settles before
 * anything is listed or served: volumes/VOLUME's root is that inode (the
 * commit happened), the mark is cleared; else the snapshot is deleted. The
 * inode cannot be another directory's: the tree is deleted only after its
 * mark is settled. A failing step undoes the receive (the snapshot dropped,
 * the exchange swapped back, a full stream's volume rolled back or removed).
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "manager/manager-internal.h"
#include "pool/sizelimit.h"
#include "util/alloc-util.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/strutil.h"

#define RECEIVE_PREFIX "receive-"

typedef struct RecvArgs {
	const char *base, *token, *snap, *id;
	bool by_move;
	VolumeSnapshot taken; /* the stream's snapshot, marked until the commit settles it */
	json_t *result;
} RecvArgs;

static void dir_name(const char *token, char buf[static 32])
{
	snprintf(buf, 32, RECEIVE_PREFIX "%s", token);
}

static void mount_name(const char *token, char buf[static 32])
{
	snprintf(buf, 32, ".receive-%s", token);
}

static bool token_is_valid(const char *t)
{
	if (!t || strlen(t) != 16)
		return false;
	for (size_t i = 0; i < 16; i++)
		if (!((t[i] >= '0' && t[i] <= '9') || (t[i] >= 'a' && t[i] <= 'f')))
			return false;
	return true;
}

static VolumeSnapshot *find_name(Volume *v, const char *snap)
{
	for (size_t i = 0; i < v->n_snaps; i++)
		if (streq(v->snaps[i].name, snap))
			return &v->snaps[i];
	return NULL;
}

static int open_fn(Manager *m, Volume *v, void *userdata, char **reterr_msg)
{
	RecvArgs *a = userdata;
	_cleanup_close_ int snaps_fd = -EBADF, dfd = -EBADF;
	VolumeSnapshot *base = manager_snapshot_find_id(v, a->base);
	char token[17], dir[32], mnt[32], path[64];
	uint64_t rnd = 0, free_b = 0, total_b = 0;
	PartitionFs *fs;
	int r;

	if (!base)
		return errmsg_set(reterr_msg, -ENOENT,
				  "volume %s has no snapshot with ID %s, the base of this incremental stream: receive a "
				  "full stream first (send without --from), or send from a snapshot this volume has "
				  "('nvmevol volume snapshots %s --json' lists their IDs)", v->name, a->base, v->name);
	if (base->data_missing)
		return errmsg_set(reterr_msg, -ENOENT, "snapshot %s of volume %s, the stream's base, has lost its data "
				  "directory", base->name, v->name);
	fs = manager_snapshot_writable_fs(m, v, "receive into", reterr_msg);
	if (!fs)
		return -ENODEV;
	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd)) {
		r = errmsg_set(reterr_msg, -EIO, "cannot draw a random receive token");
		goto out;
	}
	snprintf(token, sizeof(token), "%016llx", (unsigned long long)rnd);
	dir_name(token, dir);
	/* In project 0 while the records go in: only the state it becomes is the volume's to hold to size=. */
	r = manager_snapshot_build_copy(m, v, fs, base, dir, false, reterr_msg);
	snprintf(path, sizeof(path), "%s/%s", v->name, dir);
	snaps_fd = openat(fs->snapshots_fd, v->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (snaps_fd < 0) {
		r = r < 0 ? r : errmsg_set(reterr_msg, negative_errno(), "cannot open nvmevol/snapshots/%s", v->name);
		goto out;
	}
	if (r == 0) {
		dfd = openat(snaps_fd, dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0)
			r = errmsg_set(reterr_msg, negative_errno(), "cannot open nvmevol/snapshots/%s", path);
	}
	mount_name(token, mnt);
	if (r == 0)
		r = bind_mount_dir(m->binds, mnt, dfd, MOUNT_BIND_NOSUID | MOUNT_BIND_NODEV, reterr_msg);
	if (r < 0) {
		(void)manager_snapshot_discard_dir(m, v, fs, snaps_fd, dir);
		goto out;
	}
	(void)partition_fs_free_bytes(fs, &free_b, &total_b);
	a->result = json_pack("{s:s,s:s,s:s,s:s,s:s,s:I,s:b,s:s}", "volume", v->name, "token", token, "mount", mnt,
			      "propagated_mount", m->cfg->propagated_mount, "base_snapshot", base->name, "max_bytes",
			      (json_int_t)free_b, "allow_devices", v->opts->allow_devices, "kind", "incremental");
	if (a->result && manager_bound_identity(a->result, dfd) < 0) {
		json_decref(a->result);
		a->result = NULL;
	}
	r = a->result ? 0 : -ENOMEM;
	if (r < 0) {
		(void)bind_unmount(m->binds, mnt);
		(void)manager_snapshot_discard_dir(m, v, fs, snaps_fd, dir);
	} else
		log_info("volume %s: receive %s opened on a copy of snapshot %s", v->name, token, base->name);
out:
	partition_fs_put(fs);
	return r;
}

int manager_receive_open(Manager *m, const char *name, const char *base, const json_t *options, json_t **ret_result,
			 char **reterr_msg)
{
	RecvArgs a = { .base = base };
	int r;

	if (!base) {
		r = manager_import_open(m, name, options, ret_result, reterr_msg);
		if (r == 0 && json_object_set_new(*ret_result, "kind", json_string("full")) < 0)
			r = -ENOMEM;
		return r;
	}
	if (!snapshot_id_is_valid(base))
		return errmsg_set(reterr_msg, -EINVAL, "invalid base snapshot ID '%.64s': 32 lower-case hex digits", base);
	r = manager_run_on_volume(m, name, false, open_fn, &a, reterr_msg);
	if (r < 0) {
		json_decref(a.result);
		return r;
	}
	*ret_result = a.result;
	return 0;
}

/* Takes away the receive's bind and opens snapshots/<volume>; -ENOENT with an Err if the receive is not there. */
static int find_receive(Manager *m, Volume *v, PartitionFs *fs, const char *token, int *ret_fd, char **reterr_msg)
{
	char dir[32], mnt[32];
	struct stat st;
	int fd;

	if (!token_is_valid(token))
		return errmsg_set(reterr_msg, -EINVAL, "invalid receive token");
	dir_name(token, dir);
	mount_name(token, mnt);
	(void)bind_unmount(m->binds, mnt);
	fd = openat(fs->snapshots_fd, v->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstatat(fd, dir, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode)) {
		if (fd >= 0)
			(void)close(fd);
		return errmsg_set(reterr_msg, -ENOENT, "volume %s has no receive %s (it ended, or the plugin restarted)",
				  v->name, token);
	}
	*ret_fd = fd;
	return 0;
}

/*
 * Gives the tree @dir of @dirfd project @projid (0: uncharged), as root: XFS lets that charge pass a
 * hard limit, so the commit never fails for the moment the volume holds both states. Nothing when
 * the volume has no project ID.
 */
static int charge_tree(PartitionFs *fs, int dirfd, const char *dir, uint32_t projid, char **reterr_msg)
{
	_cleanup_close_ int fd = -EBADF;
	uint64_t tagged = 0;

	fd = openat(dirfd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot open the receive's tree: %s", errno_str(errno));
	return sizelimit_tag_tree(fs, fd, projid, &tagged, reterr_msg);
}

/*
 * Before the swap: the received state goes into the volume's project (as root, so the moment both
 * states exist cannot fail), and is refused when it alone would not fit in the volume's size= or
 * inodes=, measured as what the charge added (no usage readable, no quota: charged, not measured).
 */
static int charge_received(Volume *v, PartitionFs *fs, int snaps_fd, const char *dir, char **reterr_msg)
{
	uint64_t b0 = 0, i0 = 0, b1 = 0, i1 = 0, bytes, inodes;
	bool measured;
	char limit[32];
	int r;

	if (!v->projid)
		return 0;
	measured = (v->opts->size_bytes || v->opts->inodes) && sizelimit_usage(fs, v->projid, &b0, &i0) == 0;
	r = charge_tree(fs, snaps_fd, dir, v->projid, reterr_msg);
	if (r < 0 || !measured || sizelimit_usage(fs, v->projid, &b1, &i1) < 0)
		return r;
	bytes = b1 > b0 ? b1 - b0 : 0;
	inodes = i1 > i0 ? i1 - i0 : 0;
	if ((!v->opts->size_bytes || bytes <= v->opts->size_bytes) && (!v->opts->inodes || inodes <= v->opts->inodes))
		return 0;
	(void)charge_tree(fs, snaps_fd, dir, 0, NULL);
	if (v->opts->size_bytes && bytes > v->opts->size_bytes) {
		format_size(v->opts->size_bytes, limit, sizeof(limit));
		return errmsg_set(reterr_msg, -ENOSPC, "the received state of volume %s takes %llu bytes (%.1f MiB), more "
				  "than its size=%s: raise it ('nvmevol volume resize %s SIZE') and receive again; "
				  "nothing was changed", v->name, (unsigned long long)bytes, bytes / 1048576.0, limit,
				  v->name);
	}
	return errmsg_set(reterr_msg, -ENOSPC, "the received state of volume %s has %llu files and directories, more "
			  "than its inodes=%llu: raise it ('nvmevol volume resize %s --inodes N') and receive again; "
			  "nothing was changed", v->name, (unsigned long long)inodes, (unsigned long long)v->opts->inodes,
			  v->name);
}

/*
 * Undoes the commit's exchange: the previous state back at volumes/VOLUME with the root's times of
 * before (@prev: moved to another parent and back, it got new ones), the received one in @dir again.
 */
static int swap_back(Volume *v, PartitionFs *fs, int snaps_fd, const char *dir, const struct stat *prev)
{
	if (renameat2(snaps_fd, dir, fs->volumes_fd, v->name, RENAME_EXCHANGE) < 0) {
		log_error_errno(errno, "volume %s: cannot put the state before the receive back", v->name);
		return negative_errno();
	}
	if (fsync(fs->volumes_fd) < 0 || fsync(snaps_fd) < 0)
		log_warning_errno(errno, "volume %s: cannot sync the receive's undo", v->name);
	(void)utimensat(fs->volumes_fd, v->name, (const struct timespec[2]){ prev->st_atim, prev->st_mtim },
			AT_SYMLINK_NOFOLLOW);
	return 0;
}

/*
 * Test builds: NVMEVOL_TEST_RECEIVE_KILL=POINT ends the daemon with SIGKILL at that point of a commit:
 * before-exchange (the snapshot's marked record written, the volume untouched), before-clear (the
 * exchange, or a full stream's volume record, done; the mark not yet cleared), before-commit (a full
 * stream: the snapshot's marked record written, the volume's record not).
 */
static void test_kill_at(const char *point)
{
#if defined(NVMEVOL_TEST_HOOKS) && NVMEVOL_TEST_HOOKS
	const char *e = getenv("NVMEVOL_TEST_RECEIVE_KILL");

	if (e && streq(e, point)) {
		log_info("test hook: receive killed at %s", point);
		(void)raise(SIGKILL);
	}
#else
	(void)point;
#endif
}

static int commit_fn(Manager *m, Volume *v, void *userdata, char **reterr_msg)
{
	RecvArgs *a = userdata;
	_cleanup_close_ int snaps_fd = -EBADF;
	char use[PATH_MAX + 128] = "", dir[32];
	VolumeSnapshot snap = { 0 };
	struct stat root, prev;
	bool charged = false, exchanged = false;
	PartitionFs *fs;
	int r;

	fs = manager_snapshot_writable_fs(m, v, "receive into", reterr_msg);
	if (!fs)
		return -ENODEV;
	r = find_receive(m, v, fs, a->token, &snaps_fd, reterr_msg);
	if (r < 0)
		goto out;
	dir_name(a->token, dir);
	if (find_name(v, a->snap))
		r = errmsg_set(reterr_msg, -EEXIST, "volume %s already has a snapshot %s: the stream's snapshot takes "
			       "that name (remove it, or this stream was received already)", v->name, a->snap);
	else if (manager_snapshot_find_id(v, a->id))
		r = errmsg_set(reterr_msg, -EEXIST, "volume %s already has the stream's snapshot (ID %s): it was received "
			       "already", v->name, a->id);
	else if (manager_volume_known_in_use(v, fs, v->mounted || volume_mount_total(v) > 0, use, sizeof(use)))
		r = errmsg_set(reterr_msg, -EBUSY, "cannot receive into volume %s while it is in use: %s. Stop the "
			       "containers that use it, then receive again (nothing was changed)", v->name, use);
	else if (fstatat(snaps_fd, dir, &root, AT_SYMLINK_NOFOLLOW) < 0 ||
		 fstatat(fs->volumes_fd, v->name, &prev, AT_SYMLINK_NOFOLLOW) < 0)
		r = errmsg_set(reterr_msg, negative_errno(), "cannot look at the receive: %s", errno_str(errno));
	else if ((r = charge_received(v, fs, snaps_fd, dir, reterr_msg)) == 0) {
		_cleanup_free_ char *why = NULL;

		charged = true;
		/*
		 * The snapshot before the commit, of the received tree, marked with its root's inode: a crash from
		 * here on leaves a record that start-up settles by whether volumes/VOLUME is that tree (snapshot.h).
		 */
		r = manager_snapshot_take_received(m, v, snaps_fd, dir, a->snap, a->id, a->by_move, &snap, &why);
		if (r < 0)
			r = errmsg_set(reterr_msg, r, "cannot take snapshot %s of the received state of volume %s (nothing "
				       "was changed): %s", a->snap, v->name, why ? why : errno_str(r));
	}
	if (r == 0) {
		test_kill_at("before-exchange");
		/* The commit point: one atomic swap. The previous state is now in receive-TOKEN. */
		if (renameat2(snaps_fd, dir, fs->volumes_fd, v->name, RENAME_EXCHANGE) < 0) {
			r = errmsg_set(reterr_msg, negative_errno(), "cannot swap volume %s with the received state: %s",
				       v->name, errno_str(errno));
			(void)manager_snapshot_settle_received(m, v, &snap, false, NULL);
		} else
			exchanged = true;
	}
	if (r < 0) {
		/* Now in @dir: the received state; charged to the volume, it leaves the project, then goes. */
		if (charged && v->projid)
			(void)charge_tree(fs, snaps_fd, dir, 0, NULL);
		(void)manager_snapshot_discard_dir(m, v, fs, snaps_fd, dir);
		goto out;
	}
	if (fsync(fs->volumes_fd) < 0 || fsync(snaps_fd) < 0)
		log_warning_errno(errno, "volume %s: cannot sync the receive's rename", v->name);
	/* A directory moved to another parent gets new times: the stream's, again. */
	(void)utimensat(fs->volumes_fd, v->name, (const struct timespec[2]){ root.st_atim, root.st_mtim },
			AT_SYMLINK_NOFOLLOW);
	test_kill_at("before-clear");
	{
		_cleanup_free_ char *why = NULL;

		/* The mark's clear; if its record cannot be written, the previous state goes back, the snapshot away. */
		r = manager_snapshot_settle_received(m, v, &snap, true, &why);
		if (r < 0 && swap_back(v, fs, snaps_fd, dir, &prev) == 0) {
			exchanged = false;
			(void)manager_snapshot_settle_received(m, v, &snap, false, NULL);
			r = errmsg_set(reterr_msg, r, "cannot commit snapshot %s of the received state of volume %s, so the "
				       "volume was put back as it was (nothing was changed): %s", a->snap, v->name,
				       why ? why : errno_str(r));
		} else if (r < 0)
			r = errmsg_set(reterr_msg, r, "volume %s has the received state; its snapshot %s is settled at the "
				       "next start: %s", v->name, a->snap, why ? why : errno_str(r));
	}
	/* The previous state (or, undone, the received one) leaves the volume's project before the trash deletes it. */
	if (v->projid) {
		_cleanup_free_ char *why = NULL;

		if (charge_tree(fs, snaps_fd, dir, 0, &why) < 0)
			log_warning("volume %s: the state before the receive stays charged to it until the trash deletes "
				    "it: %s", v->name, why ? why : "?");
	}
	if (manager_snapshot_discard_dir(m, v, fs, snaps_fd, dir) < 0)
		log_warning("volume %s: the state before the receive stays in nvmevol/snapshots/%s/%s until the next start",
			    v->name, v->name, dir);
	if (r < 0 || !exchanged)
		goto out;
	log_info("volume %s: received snapshot %s (ID %s) as an incremental stream", v->name, a->snap, a->id);
	a->result = json_pack("{s:s,s:s,s:s,s:s}", "volume", v->name, "snapshot", a->snap, "id", a->id, "result",
			      "received");
	r = a->result ? 0 : -ENOMEM;
out:
	partition_fs_put(fs);
	return r;
}

/* A full stream's: the snapshot of the new volume's tree, before its record (the commit point). */
static int full_before_commit(Manager *m, Volume *v, PartitionFs *fs, void *userdata, char **reterr_msg)
{
	RecvArgs *a = userdata;
	_cleanup_free_ char *why = NULL;
	int r;

	r = manager_snapshot_take_received(m, v, fs->volumes_fd, v->name, a->snap, a->id, a->by_move, &a->taken, &why);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot take snapshot %s of volume %s received from the stream, so the "
				  "volume was not created (nothing was changed): %s", a->snap, v->name,
				  why ? why : errno_str(r));
	test_kill_at("before-commit");
	return 0;
}

static void full_undo(Manager *m, Volume *v, PartitionFs *fs, void *userdata)
{
	RecvArgs *a = userdata;

	(void)fs;
	(void)manager_snapshot_settle_received(m, v, &a->taken, false, NULL);
}

static int settle_fn(Manager *m, Volume *v, void *userdata, char **reterr_msg)
{
	RecvArgs *a = userdata;

	test_kill_at("before-clear");
	return manager_snapshot_settle_received(m, v, &a->taken, true, reterr_msg);
}

int manager_receive_commit(Manager *m, const char *name, const char *token, const char *uuid, const char *base,
			   const json_t *options, const char *snap, const char *id, bool by_move, json_t **ret_result,
			   char **reterr_msg)
{
	RecvArgs a = { .base = base, .token = token, .snap = snap, .id = id, .by_move = by_move };
	const CreateHook hook = { .before_commit = full_before_commit, .undo = full_undo, .userdata = &a };
	json_t *done = NULL;
	int r;

	if (!snap || !volume_name_is_valid(snap))
		return errmsg_set(reterr_msg, -EINVAL, "invalid snapshot name '%.64s'", snap ? snap : "");
	if (!snapshot_id_is_valid(id))
		return errmsg_set(reterr_msg, -EINVAL, "invalid snapshot ID '%.64s': 32 lower-case hex digits", id ? id : "");
	if (base) {
		r = manager_run_on_volume(m, name, false, commit_fn, &a, reterr_msg);
		if (r < 0) {
			json_decref(a.result);
			return r;
		}
		*ret_result = a.result;
		return 0;
	}
	/* The snapshot is taken inside the create, marked, before the volume's record: both or neither. */
	r = manager_import_commit_hooked(m, name, token, uuid, options, &hook, &done, reterr_msg);
	json_decref(done);
	if (r < 0)
		return r;
	{
		_cleanup_free_ char *why = NULL;

		r = manager_run_on_volume(m, name, false, settle_fn, &a, &why);
		if (r < 0) {
			_cleanup_free_ char *why_remove = NULL;
			Partition *part = pool_find_uuid(m->pool, uuid);
			PartitionFs *fs = part ? partition_fs_get(m->pool, part) : NULL;

			/*
			 * The volume this receive made goes again, then its snapshot (a crash between: start-up
			 * deletes a marked snapshot whose volume is not there): a receive is both or nothing.
			 */
			bool removed = manager_remove(m, name, &why_remove) == 0;

			if (removed && fs)
				manager_snapshot_drop_received(m, part, fs, name);
			partition_fs_put(fs);
			if (removed)
				return errmsg_set(reterr_msg, r, "cannot commit snapshot %s of volume %s received from the "
						  "stream, so the volume was removed again (nothing was changed): %s", snap,
						  name, why ? why : errno_str(r));
			return errmsg_set(reterr_msg, r, "volume %s was created from the stream; its snapshot %s could "
					  "not be committed (settled at the next start), and the volume could not be "
					  "removed (%s): %s", name, snap, why_remove ? why_remove : "?",
					  why ? why : errno_str(r));
		}
	}
	log_info("volume %s: received snapshot %s (ID %s) as a full stream", name, snap, id);
	*ret_result = json_pack("{s:s,s:s,s:s,s:s}", "volume", name, "snapshot", snap, "id", id, "result", "received");
	return *ret_result ? 0 : -ENOMEM;
}

static int abort_fn(Manager *m, Volume *v, void *userdata, char **reterr_msg)
{
	RecvArgs *a = userdata;
	_cleanup_close_ int snaps_fd = -EBADF;
	PartitionFs *fs;
	char dir[32];
	int r;

	fs = manager_snapshot_writable_fs(m, v, "receive into", reterr_msg);
	if (!fs)
		return -ENODEV;
	r = find_receive(m, v, fs, a->token, &snaps_fd, reterr_msg);
	if (r == 0) {
		dir_name(a->token, dir);
		(void)manager_snapshot_discard_dir(m, v, fs, snaps_fd, dir);
		log_info("volume %s: receive %s abandoned; the volume is as it was", v->name, a->token);
		a->result = json_pack("{s:s,s:s}", "volume", v->name, "result", "abandoned");
		r = a->result ? 0 : -ENOMEM;
	}
	partition_fs_put(fs);
	return r;
}

int manager_receive_abort(Manager *m, const char *name, const char *token, const char *uuid, const char *base,
			  json_t **ret_result, char **reterr_msg)
{
	RecvArgs a = { .token = token };
	int r;

	if (!base)
		return manager_import_abort(m, name, token, uuid, ret_result, reterr_msg);
	r = manager_run_on_volume(m, name, false, abort_fn, &a, reterr_msg);
	if (r < 0) {
		json_decref(a.result);
		return r;
	}
	*ret_result = a.result;
	return 0;
}

typedef struct Leftovers {
	char names[8][32];
	size_t n;
} Leftovers;

static int collect(const char *name, void *userdata)
{
	Leftovers *l = userdata;

	if (strncmp(name, RECEIVE_PREFIX, strlen(RECEIVE_PREFIX)) == 0 && strlen(name) < 32 && l->n < ELEMENTSOF(l->names))
		snprintf(l->names[l->n++], 32, "%s", name);
	return 0;
}

void manager_receive_cleanup(Manager *m, Volume *v, PartitionFs *fs, int vol_fd)
{
	Leftovers l = { .n = 0 };

	/* At most 8 a start: more would be a leftover of 8 interrupted receives at once. */
	(void)dir_foreach_name(vol_fd, collect, &l);
	for (size_t i = 0; i < l.n; i++) {
		log_info("volume %s: deleting what an interrupted receive left (never the live volume): %s", v->name,
			 l.names[i]);
		(void)manager_snapshot_discard_dir(m, v, fs, vol_fd, l.names[i]);
	}
}
