/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <libmount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/sysmacros.h>

#include "pool/mount.h"
#include "util/macro.h"

DEFINE_CLEANUP_FUNC(struct libmnt_table *, mnt_unref_table)
DEFINE_CLEANUP_FUNC(struct libmnt_context *, mnt_free_context)
DEFINE_CLEANUP_FUNC(struct libmnt_iter *, mnt_free_iter)

void mount_entry_done(MountEntry *e)
{
	free(e->target);
	free(e->root);
	free(e->fstype);
	free(e->source);
	free(e->vfs_options);
	free(e->fs_options);
	free(e->optional);
	*e = (MountEntry){ 0 };
}

void mount_entries_free(MountEntry *e, size_t n)
{
	for (size_t i = 0; i < n; i++)
		mount_entry_done(&e[i]);
	free(e);
}

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : "");
}

static int entry_from_fs(struct libmnt_fs *fs, MountEntry *ret)
{
	MountEntry e = {
		.dev = mnt_fs_get_devno(fs),
		.target = dup_or_empty(mnt_fs_get_target(fs)),
		.root = dup_or_empty(mnt_fs_get_root(fs)),
		.fstype = dup_or_empty(mnt_fs_get_fstype(fs)),
		.source = dup_or_empty(mnt_fs_get_source(fs)),
		.vfs_options = dup_or_empty(mnt_fs_get_vfs_options(fs)),
		.fs_options = dup_or_empty(mnt_fs_get_fs_options(fs)),
		.optional = dup_or_empty(mnt_fs_get_optional_fields(fs)),
	};

	if (!e.target || !e.root || !e.fstype || !e.source || !e.vfs_options || !e.fs_options || !e.optional) {
		mount_entry_done(&e);
		return -ENOMEM;
	}
	*ret = e;
	return 0;
}

static int load_table(const char *buf, size_t len, struct libmnt_table **ret)
{
	struct libmnt_table *tb = mnt_new_table();
	int r;

	if (!tb)
		return -ENOMEM;
	if (buf) {
		FILE *f = fmemopen((void *)buf, len, "r");
		if (!f) {
			mnt_unref_table(tb);
			return -ENOMEM;
		}
		r = mnt_table_parse_stream(tb, f, "mountinfo");
		fclose(f);
	} else
		r = mnt_table_parse_file(tb, "/proc/self/mountinfo");
	if (r < 0) {
		mnt_unref_table(tb);
		return r < -4096 ? -EINVAL : r;
	}
	*ret = tb;
	return 0;
}

typedef bool (*FsMatch)(struct libmnt_fs *fs, const void *arg);

/* The first mount in @direction that @match accepts, read from the kernel's mountinfo. */
static int find_fs(int direction, FsMatch match, const void *arg, MountEntry *ret)
{
	_cleanup_(mnt_unref_tablep) struct libmnt_table *tb = NULL;
	_cleanup_(mnt_free_iterp) struct libmnt_iter *it = NULL;
	struct libmnt_fs *fs;
	int r;

	r = load_table(NULL, 0, &tb);
	if (r < 0)
		return r;
	it = mnt_new_iter(direction);
	if (!it)
		return -ENOMEM;
	while (mnt_table_next_fs(tb, it, &fs) == 0)
		if (match(fs, arg))
			return entry_from_fs(fs, ret);
	return -ENOENT;
}

static bool target_is(struct libmnt_fs *fs, const void *arg)
{
	const char *t = mnt_fs_get_target(fs);
	return t && streq(t, (const char *)arg);
}

int mountinfo_find_target(const char *target, MountEntry *ret)
{
	/* Backwards by hand (the topmost mount wins): mnt_table_find_target() would canonicalize paths. */
	return find_fs(MNT_ITER_BACKWARD, target_is, target, ret);
}

static bool whole_fs_of(struct libmnt_fs *fs, const void *arg)
{
	const char *root = mnt_fs_get_root(fs);
	return mnt_fs_get_devno(fs) == *(const dev_t *)arg && root && streq(root, "/");
}

int mountinfo_find_device(dev_t dev, MountEntry *ret)
{
	return find_fs(MNT_ITER_FORWARD, whole_fs_of, &dev, ret);
}

static int collect(struct libmnt_table *tb, const char *prefix, MountEntry **ret, size_t *ret_n)
{
	_cleanup_(mnt_free_iterp) struct libmnt_iter *it = NULL;
	struct libmnt_fs *fs;
	MountEntry *v = NULL;
	size_t n = 0, plen = prefix ? strlen(prefix) : 0;
	int r = 0;

	it = mnt_new_iter(MNT_ITER_FORWARD);
	if (!it)
		return -ENOMEM;
	while (mnt_table_next_fs(tb, it, &fs) == 0) {
		const char *t = mnt_fs_get_target(fs);
		MountEntry *nv;

		if (prefix && (!t || strncmp(t, prefix, plen) != 0 || t[plen] != '/' || t[plen + 1] == '\0'))
			continue;
		nv = realloc(v, (n + 1) * sizeof(*v));
		if (!nv) {
			r = -ENOMEM;
			break;
		}
		v = nv;
		r = entry_from_fs(fs, &v[n]);
		if (r < 0)
			break;
		n++;
	}
	if (r < 0) {
		mount_entries_free(v, n);
		return r;
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

int mountinfo_list_below(const char *prefix, MountEntry **ret, size_t *ret_n)
{
	_cleanup_(mnt_unref_tablep) struct libmnt_table *tb = NULL;
	int r;

	r = load_table(NULL, 0, &tb);
	if (r < 0)
		return r;
	return collect(tb, prefix, ret, ret_n);
}

int mountinfo_parse_buffer(const char *buf, size_t len, MountEntry **ret, size_t *ret_n)
{
	_cleanup_(mnt_unref_tablep) struct libmnt_table *tb = NULL;
	int r;

	r = load_table(buf, len, &tb);
	if (r < 0)
		return r;
	return collect(tb, NULL, ret, ret_n);
}

bool mount_options_contain(const char *options, const char *opt)
{
	size_t n = strlen(opt);

	for (const char *p = options; p && *p;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);

		if (len == n && strncmp(p, opt, n) == 0)
			return true;
		p = comma ? comma + 1 : NULL;
	}
	return false;
}

bool mount_is_shared(const MountEntry *e)
{
	return e->optional && strstr(e->optional, "shared:") != NULL;
}

int mount_filesystem(const char *device, const char *target, const char *fstype, const char *options,
		     char **reterr_msg)
{
	_cleanup_(mnt_free_contextp) struct libmnt_context *cxt = NULL;
	int r;

	cxt = mnt_new_context();
	if (!cxt)
		return -ENOMEM;
	/* The plugin rootfs has no /sbin/mount.<type> and no fstab or utab to update. */
	(void)mnt_context_disable_helpers(cxt, 1);
	(void)mnt_context_disable_mtab(cxt, 1);
	(void)mnt_context_disable_canonicalize(cxt, 1);
	r = mnt_context_set_source(cxt, device);
	if (r == 0)
		r = mnt_context_set_target(cxt, target);
	if (r == 0)
		r = mnt_context_set_fstype(cxt, fstype);
	if (r == 0)
		r = mnt_context_set_options(cxt, options);
	if (r < 0)
		return r;

	r = mnt_context_mount(cxt);
	if (r != 0) {
		/* libmount: >0 is the mount(2) errno, <0 is -errno or -MNT_ERR_*. */
		int err = r > 0 ? r : (r > -4096 ? -r : EINVAL);
		if (mnt_context_syscall_called(cxt) && mnt_context_get_syscall_errno(cxt) > 0)
			err = mnt_context_get_syscall_errno(cxt);
		if (reterr_msg) {
			char buf[512] = "";
			(void)mnt_context_get_excode(cxt, r, buf, sizeof(buf));
			free(*reterr_msg);
			*reterr_msg = strdup(buf[0] ? buf : strerrordesc_np(err) ? strerrordesc_np(err) : "mount failed");
		}
		return -err;
	}
	/* Partition mounts never propagate (the per-volume binds are what Docker sees). */
	if (mount(NULL, target, NULL, MS_PRIVATE, NULL) < 0) {
		int err = errno;
		(void)umount2(target, UMOUNT_NOFOLLOW);
		return -err;
	}
	return 0;
}

int mount_bind(int src_fd, int target_fd, unsigned flags)
{
	struct mount_attr attr = {
		.attr_set = MOUNT_ATTR_NOATIME | MOUNT_ATTR_NODIRATIME,
		.attr_clr = MOUNT_ATTR__ATIME,
	};

	attr.attr_set |= (flags & MOUNT_BIND_RDONLY ? MOUNT_ATTR_RDONLY : 0) |
			 (flags & MOUNT_BIND_NOSUID ? MOUNT_ATTR_NOSUID : 0) | (flags & MOUNT_BIND_NODEV ? MOUNT_ATTR_NODEV : 0);
	attr.attr_clr |= (flags & MOUNT_BIND_RDONLY ? 0 : MOUNT_ATTR_RDONLY) |
			 (flags & MOUNT_BIND_NOSUID ? 0 : MOUNT_ATTR_NOSUID) | (flags & MOUNT_BIND_NODEV ? 0 : MOUNT_ATTR_NODEV);
	_cleanup_close_ int tree = -EBADF;

	tree = open_tree(src_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (tree < 0)
		return negative_errno();
	if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return negative_errno();
	if (move_mount(tree, "", target_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return negative_errno();
	return 0;
}

int unmount_path(const char *path)
{
	if (umount2(path, UMOUNT_NOFOLLOW) == 0)
		return 0;
	/* Busy, or any other failure: a lazy detach takes the mount out of the namespace all the same. */
	if (umount2(path, UMOUNT_NOFOLLOW | MNT_DETACH) == 0)
		return 0;
	return negative_errno();
}
