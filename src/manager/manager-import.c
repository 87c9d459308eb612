/* SPDX-License-Identifier: MIT */
/*
 * Import: the admin command writes a tar stream (cli/tar-read.c) into a
 * directory nvmevol/imports/TOKEN of the partition the new volume goes to,
 * bound read-write, nosuid, nodev at <PropagatedMount>/.import-TOKEN; at the
 * commit that directory fills the new volume through Create's commit order
 * (pending index entry, directory, a block-sharing copy of the import,
 * record: the commit point), and goes to the trash either way. Nothing of an
 * import is a volume before its record: a failed or abandoned one is a
 * directory in imports/, which start-up deletes (nothing there was ever
 * committed), and a bind start-up takes away as a stray.
 *
 * Stateless between the calls: the token, the partition and the options come
 * back with the commit, from root on the admin socket.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "manager/manager-internal.h"
#include "pool/sizelimit.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/log.h"
#include "util/macro.h"

static void mount_name(const char *token, char buf[static 32])
{
	snprintf(buf, 32, ".import-%s", token);
}

static int parse_options(const json_t *options, VolumeOptions *ret, char **reterr_msg)
{
	CloneRequest clone = { 0 };
	int r;

	r = volume_options_parse_create(options, ret, &clone, reterr_msg);
	if (r < 0)
		return r;
	if (clone.from[0])
		return errmsg_set(reterr_msg, -EINVAL, "from= makes a clone; an import makes a volume from a stream");
	return 0;
}

int manager_import_open(Manager *m, const char *name, const json_t *options, json_t **ret_result, char **reterr_msg)
{
	_cleanup_(volume_unrefp) Volume *existing = NULL;
	_cleanup_close_ int dfd = -EBADF;
	char token[17], mnt[32], pname[PARTITION_NAME_MAX];
	uint64_t rnd = 0, free_b = 0, total_b = 0, max_bytes;
	VolumeOptions opts;
	PartitionInfo info;
	PartitionFs *fs;
	Partition *part;
	int r;

	if (!volume_name_is_valid(name))
		return errmsg_set(reterr_msg, -EINVAL, "invalid volume name");
	r = parse_options(options, &opts, reterr_msg);
	if (r < 0)
		return r;
	existing = registry_lookup(m->reg, name);
	if (existing)
		return errmsg_set(reterr_msg, -EEXIST, "volume %s exists: an import makes a new volume (remove it, or "
				  "import under another name)", name);
	part = manager_choose_partition(m, &opts, reterr_msg);
	if (!part)
		return -ENODEV;
	partition_snapshot(m->pool, part, &info);
	partition_display_name(&info, pname, sizeof(pname));
	fs = partition_fs_get(m->pool, part);
	if (!fs)
		return errmsg_set(reterr_msg, -ENODEV, "partition %s went away", pname);
	if (!info.adopted || fs->read_only || fs->imports_fd < 0) {
		r = errmsg_set(reterr_msg, -EROFS, "partition %s is read-only until adopted ('nvmevol partition adopt %s')",
			       pname, info.uuid);
		goto out;
	}
	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd)) {
		r = errmsg_set(reterr_msg, -EIO, "cannot draw a random import token");
		goto out;
	}
	snprintf(token, sizeof(token), "%016llx", (unsigned long long)rnd);
	if (mkdirat(fs->imports_fd, token, 0700) < 0 ||
	    (dfd = openat(fs->imports_fd, token, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		r = errmsg_set(reterr_msg, negative_errno(), "cannot make nvmevol/imports/%s on partition %s: %s", token,
			       pname, errno_str(errno));
		goto out;
	}
	mount_name(token, mnt);
	r = bind_mount_dir(m->binds, mnt, dfd, MOUNT_BIND_NOSUID | MOUNT_BIND_NODEV, reterr_msg);
	if (r < 0) {
		(void)rm_rf_at(fs->imports_fd, token);
		goto out;
	}
	/* What the stream may write: the size limit if there is one, else the free space. */
	(void)partition_fs_free_bytes(fs, &free_b, &total_b);
	max_bytes = opts.size_bytes && opts.size_bytes < free_b ? opts.size_bytes : free_b;
	*ret_result = json_pack("{s:s,s:s,s:s,s:s,s:s,s:I,s:b}", "volume", name, "token", token, "partition", info.uuid,
				"mount", mnt, "propagated_mount", m->cfg->propagated_mount, "max_bytes",
				(json_int_t)max_bytes, "allow_devices", opts.allow_devices);
	if (*ret_result && manager_bound_identity(*ret_result, dfd) < 0) {
		json_decref(*ret_result);
		*ret_result = NULL;
	}
	r = *ret_result ? 0 : -ENOMEM;
	if (r == 0)
		log_info("volume %s: import %s opened on partition %s", name, token, pname);
out:
	partition_fs_put(fs);
	return r;
}

/* Takes the import's bind away and sends its directory to the trash. */
static void discard(Manager *m, PartitionFs *fs, const char *uuid, const char *token)
{
	char mnt[32], entry[TRASH_ENTRY_MAX];

	mount_name(token, mnt);
	(void)bind_unmount(m->binds, mnt);
	if (trash_move_in(fs, fs->imports_fd, token, entry) == 0) {
		(void)fsync(fs->trash_fd);
		(void)fsync(fs->imports_fd);
		(void)trash_enqueue(m->trash, fs, uuid, entry);
	}
}

static int find_import(Manager *m, const char *uuid, const char *token, PartitionFs **ret_fs, char **reterr_msg)
{
	Partition *part = pool_find_uuid(m->pool, uuid);
	PartitionFs *fs = part ? partition_fs_get(m->pool, part) : NULL;
	struct stat st;

	if (!fs)
		return errmsg_set(reterr_msg, -ENODEV, "partition %s of the import is not available", uuid);
	if (fs->imports_fd < 0 || fstatat(fs->imports_fd, token, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode)) {
		partition_fs_put(fs);
		return errmsg_set(reterr_msg, -ENOENT, "there is no import %s (it ended, or the plugin restarted)", token);
	}
	*ret_fs = fs;
	return 0;
}

int manager_import_commit(Manager *m, const char *name, const char *token, const char *uuid, const json_t *options,
			  json_t **ret_result, char **reterr_msg)
{
	return manager_import_commit_hooked(m, name, token, uuid, options, NULL, ret_result, reterr_msg);
}

int manager_import_commit_hooked(Manager *m, const char *name, const char *token, const char *uuid,
				 const json_t *options, const CreateHook *hook, json_t **ret_result, char **reterr_msg)
{
	_cleanup_close_ int dfd = -EBADF;
	VolumeOptions opts;
	PartitionFs *fs = NULL;
	char mnt[32];
	int r;

	r = find_import(m, uuid, token, &fs, reterr_msg);
	if (r < 0)
		return r;
	mount_name(token, mnt);
	(void)bind_unmount(m->binds, mnt);
	r = parse_options(options, &opts, reterr_msg);
	if (r == 0) {
		/* Placed where the stream was written (the copy shares its blocks), without pinning it there. */
		dfd = openat(fs->imports_fd, token, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		r = dfd < 0 ? errmsg_set(reterr_msg, negative_errno(), "cannot open the import: %s", errno_str(errno))
			    : manager_create_filled(m, name, &opts, uuid, dfd, hook, reterr_msg);
	}
	discard(m, fs, uuid, token);
	partition_fs_put(fs);
	if (r < 0)
		return r;
	log_info("volume %s: imported (import %s)", name, token);
	*ret_result = json_pack("{s:s,s:s}", "volume", name, "result", "imported");
	return *ret_result ? 0 : -ENOMEM;
}

int manager_import_abort(Manager *m, const char *name, const char *token, const char *uuid, json_t **ret_result,
			 char **reterr_msg)
{
	PartitionFs *fs = NULL;
	int r;

	r = find_import(m, uuid, token, &fs, reterr_msg);
	if (r < 0)
		return r;
	discard(m, fs, uuid, token);
	partition_fs_put(fs);
	log_info("volume %s: import %s abandoned; nothing of it stays", name, token);
	*ret_result = json_pack("{s:s,s:s}", "volume", name, "result", "abandoned");
	return *ret_result ? 0 : -ENOMEM;
}
