/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "pool/bind.h"
#include "util/errmsg.h"
#include "util/fs-util.h"
#include "util/macro.h"

struct Binds {
	char *path; /* the propagated mount */
	int fd;
};

Binds *binds_free(Binds *b)
{
	if (!b)
		return NULL;
	if (b->fd >= 0)
		close(b->fd);
	free(b->path);
	free(b);
	return NULL;
}

int binds_open(const char *propagated_mount, Binds **ret, char **reterr_msg)
{
	_cleanup_close_ int fd = -EBADF;
	Binds *b;
	int r;

	r = mkdir_p_open(propagated_mount, 0755, &fd);
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot open %s: %s", propagated_mount, errno_str(r));
	b = calloc(1, sizeof(*b));
	if (!b || !(b->path = strdup(propagated_mount))) {
		free(b);
		return -ENOMEM;
	}
	b->fd = TAKE_FD(fd);
	*ret = b;
	return 0;
}

void bind_path(Binds *b, const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", b->path, name);
}

unsigned bind_flags(const VolumeOptions *o, bool read_only, bool grants_unconfirmed)
{
	/* A partition not adopted yet, or a record this host never granted: its own options grant nothing. */
	bool trusted = !read_only && !grants_unconfirmed;

	return (o->allow_suid && trusted ? 0 : MOUNT_BIND_NOSUID) | (o->allow_devices && trusted ? 0 : MOUNT_BIND_NODEV) |
	       (read_only ? MOUNT_BIND_RDONLY : 0);
}

void bind_root(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "/nvmevol/volumes/%s", name);
}

bool bind_entry_is_volume(const MountEntry *e, const char *name, dev_t dev)
{
	char root[VOLUME_NAME_MAX + 32];

	bind_root(name, root, sizeof(root));
	return e->dev == dev && streq(e->root, root);
}

bool bind_entry_matches(const MountEntry *e, const char *name, dev_t dev, unsigned flags)
{
	return bind_entry_is_volume(e, name, dev) && mount_options_contain(e->vfs_options, "noatime") &&
	       mount_options_contain(e->vfs_options, "nodiratime") &&
	       mount_options_contain(e->vfs_options, "nosuid") == !!(flags & MOUNT_BIND_NOSUID) &&
	       mount_options_contain(e->vfs_options, "nodev") == !!(flags & MOUNT_BIND_NODEV) &&
	       mount_options_contain(e->vfs_options, "ro") == !!(flags & MOUNT_BIND_RDONLY);
}

int bind_verify(Binds *b, const char *name, dev_t dev, unsigned flags, char **ret_options, char **reterr_why)
{
	char target[PATH_MAX];
	MountEntry e = { 0 };
	int r;

	bind_path(b, name, target, sizeof(target));
	r = mountinfo_find_target(target, &e);
	if (r < 0) {
		if (reterr_why)
			*reterr_why = strdup(r == -ENOENT ? "not mounted" : errno_str(r));
		return r;
	}
	if (!bind_entry_matches(&e, name, dev, flags)) {
		r = -ENXIO;
		if (reterr_why && asprintf(reterr_why, "kernel shows %s mounted from %u:%u%s with '%s'", target,
					   major(e.dev), minor(e.dev), e.root, e.vfs_options) < 0)
			*reterr_why = NULL;
	} else if (ret_options)
		*ret_options = TAKE_PTR(e.vfs_options);
	mount_entry_done(&e);
	return r;
}

void bind_remove_mountpoint(Binds *b, const char *name)
{
	(void)unlinkat(b->fd, name, AT_REMOVEDIR);
}

/* An empty directory of ours at the mountpoint, on the propagated mount's own filesystem. */
static int open_mountpoint(Binds *b, const char *name, int *ret, char **reterr_msg)
{
	char path[PATH_MAX];
	struct stat st, pst;
	int fd, r;

	bind_path(b, name, path, sizeof(path));
	r = mkdirat_exist_ok(b->fd, name, 0755);
	if (r == -ENOTDIR) {
		/* Something else (a symlink?) sits where our mountpoint goes: the propagated mount is ours. */
		(void)unlinkat(b->fd, name, 0);
		r = mkdirat_exist_ok(b->fd, name, 0755);
	}
	if (r < 0)
		return errmsg_set(reterr_msg, r, "cannot create mountpoint %s: %s", path, errno_str(r));
	fd = openat(b->fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot open mountpoint %s: %s", path, errno_str(errno));
	if (fstat(fd, &st) < 0 || fstat(b->fd, &pst) < 0) {
		r = negative_errno();
		(void)close(fd);
		return errmsg_set(reterr_msg, r, "cannot stat %s: %s", path, errno_str(r));
	}
	if (st.st_dev != pst.st_dev) {
		/* A stale mount from before a crash sits there: take it away and retry once. */
		(void)close(fd);
		(void)unmount_path(path);
		fd = openat(b->fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &st) < 0 || st.st_dev != pst.st_dev) {
			if (fd >= 0)
				(void)close(fd);
			return errmsg_set(reterr_msg, -EBUSY, "mountpoint %s is occupied by another mount", path);
		}
	}
	*ret = fd;
	return 0;
}

int bind_mount(Binds *b, const char *name, PartitionFs *fs, unsigned flags, char **ret_options, char **reterr_msg)
{
	_cleanup_close_ int src = -EBADF, target = -EBADF;
	_cleanup_free_ char *why = NULL;
	char path[PATH_MAX];
	struct stat st;
	int r;

	if (fs->volumes_fd < 0)
		return errmsg_set(reterr_msg, -ENOENT, "the partition has no nvmevol/volumes directory");
	src = openat(fs->volumes_fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (src < 0)
		return errmsg_set(reterr_msg, negative_errno(), "the directory of volume %s is missing or not a directory: %s",
				  name, errno_str(errno));
	if (fstat(src, &st) < 0 || st.st_dev != fs->dev)
		return errmsg_set(reterr_msg, -EXDEV, "the directory of volume %s is not on its partition", name);
	r = open_mountpoint(b, name, &target, reterr_msg);
	if (r < 0)
		return r;

	bind_path(b, name, path, sizeof(path));
	r = mount_bind(src, target, flags);
	if (r < 0) {
		bind_remove_mountpoint(b, name);
		return errmsg_set(reterr_msg, r, "bind mount of volume %s failed: %s", name, errno_str(r));
	}
	r = bind_verify(b, name, fs->dev, flags, ret_options, &why);
	if (r < 0) {
		(void)unmount_path(path);
		bind_remove_mountpoint(b, name);
		return errmsg_set(reterr_msg, r, "volume %s was not mounted as asked (%s); refusing to serve it", name,
				  why ? why : errno_str(r));
	}
	return 0;
}

int bind_mount_dir(Binds *b, const char *name, int src_fd, unsigned flags, char **reterr_msg)
{
	_cleanup_close_ int target = -EBADF;
	char path[PATH_MAX];
	struct stat a, m;
	int r;

	if (fstat(src_fd, &a) < 0)
		return errmsg_set(reterr_msg, negative_errno(), "cannot stat what to bind: %s", errno_str(errno));
	r = open_mountpoint(b, name, &target, reterr_msg);
	if (r < 0)
		return r;
	bind_path(b, name, path, sizeof(path));
	r = mount_bind(src_fd, target, flags);
	if (r < 0) {
		bind_remove_mountpoint(b, name);
		return errmsg_set(reterr_msg, r, "bind mount at %s failed: %s", path, errno_str(r));
	}
	if (fstatat(b->fd, name, &m, AT_SYMLINK_NOFOLLOW) < 0 || m.st_dev != a.st_dev || m.st_ino != a.st_ino) {
		(void)bind_unmount(b, name);
		return errmsg_set(reterr_msg, -EIO, "the bind at %s does not show what was bound", path);
	}
	return 0;
}

int bind_unmount(Binds *b, const char *name)
{
	char path[PATH_MAX];
	MountEntry e = { 0 };
	int r;

	bind_path(b, name, path, sizeof(path));
	while (mountinfo_find_target(path, &e) == 0) {
		mount_entry_done(&e);
		r = unmount_path(path);
		if (r < 0)
			return r;
	}
	bind_remove_mountpoint(b, name);
	return 0;
}

int bind_list_all(Binds *b, MountEntry **ret, size_t *ret_n)
{
	return mountinfo_list_below(b->path, ret, ret_n);
}

void bind_clean_mountpoints(Binds *b, bool (*keep)(const char *name, void *userdata), void *userdata)
{
	struct dirent *de;
	DIR *d = opendir_fd(b->fd);

	if (!d)
		return;
	/* Dot names are never volumes: ".state" may be the state directory (statedir.h). */
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && !keep(de->d_name, userdata))
			(void)unlinkat(b->fd, de->d_name, AT_REMOVEDIR);
	closedir(d);
}
