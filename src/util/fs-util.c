/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <limits.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/fs-util.h"
#include "util/macro.h"

#define RM_RF_MAX_DEPTH 4096

DIR *opendir_fd(int dirfd)
{
	int dupfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	DIR *d;

	if (dupfd < 0)
		return NULL;
	d = fdopendir(dupfd);
	if (!d) {
		int saved = errno;
		(void)close(dupfd);
		errno = saved;
		return NULL;
	}
	/* The duplicate shares the file offset: start from the top whatever was read before. */
	rewinddir(d);
	return d;
}

bool is_atomic_tmp_name(const char *name)
{
	return name[0] == '.' && strstr(name, ".tmp.") != NULL;
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int write_file_atomic_at(int dirfd, const char *name, const void *buf, size_t len, mode_t mode)
{
	char tmp[320];
	uint64_t rnd = 0;
	int fd, r;

	if (strlen(name) > 255 - 24)
		return -ENAMETOOLONG;
	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) < 0)
		rnd = (uint64_t)getpid() ^ (uint64_t)(uintptr_t)buf;
	snprintf(tmp, sizeof(tmp), ".%s.tmp.%016llx", name, (unsigned long long)rnd);

	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return negative_errno();

	r = write_all(fd, buf, len);
	if (r == 0 && fsync(fd) < 0)
		r = negative_errno();
	if (close(fd) < 0 && r == 0)
		r = negative_errno();
	if (r == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
		r = negative_errno();
	if (r < 0) {
		(void)unlinkat(dirfd, tmp, 0);
		return r;
	}
	/* The rename is only durable once the directory itself is synced. */
	if (fsync(dirfd) < 0)
		return negative_errno();
	return 0;
}

int read_file_at(int dirfd, const char *name, size_t max, char **ret, size_t *ret_len)
{
	_cleanup_close_ int fd = -EBADF;
	_cleanup_free_ char *buf = NULL;
	struct stat st;
	size_t len = 0;

	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return negative_errno();
	if (fstat(fd, &st) < 0)
		return negative_errno();
	if (!S_ISREG(st.st_mode))
		return -EBADFD;
	if ((uint64_t)st.st_size > max)
		return -EFBIG;

	/* Sized by fstat, grown only if the file grows while being read; never past @max. */
	size_t cap = (size_t)st.st_size + 1;
	buf = malloc(cap + 1);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n;
		if (len == cap) {
			char *nb;
			if (cap > max)
				return -EFBIG;
			cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
			nb = realloc(buf, cap + 1);
			if (!nb)
				return -ENOMEM;
			buf = nb;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > max)
			return -EFBIG;
	}
	buf[len] = '\0';
	*ret = TAKE_PTR(buf);
	if (ret_len)
		*ret_len = len;
	return 0;
}

int unlink_durable_at(int dirfd, const char *name)
{
	if (unlinkat(dirfd, name, 0) < 0) {
		if (errno == ENOENT)
			return 0;
		return negative_errno();
	}
	if (fsync(dirfd) < 0)
		return negative_errno();
	return 0;
}

int openat_beneath(int dirfd, const char *path, int flags, mode_t mode)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   RESOLVE_NO_XDEV,
	};
	long fd;

	do
		fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
	while (fd < 0 && errno == EAGAIN);
	if (fd < 0)
		return negative_errno();
	return (int)fd;
}

int mkdirat_exist_ok(int dirfd, const char *name, mode_t mode)
{
	struct stat st;

	if (mkdirat(dirfd, name, mode) == 0)
		return 1;
	if (errno != EEXIST)
		return negative_errno();
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return negative_errno();
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	return 0;
}

int mkdir_p_open(const char *path, mode_t mode, int *ret_fd)
{
	char buf[PATH_MAX];
	int r;

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		r = mkdirat_exist_ok(AT_FDCWD, buf, 0755);
		*p = '/';
		if (r < 0)
			return r;
	}
	r = mkdirat_exist_ok(AT_FDCWD, buf, mode);
	if (r < 0)
		return r;
	*ret_fd = open(buf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return *ret_fd < 0 ? negative_errno() : 0;
}

static int rm_rf_children_depth(int dirfd, dev_t dev, unsigned depth)
{
	DIR *d;
	struct dirent *de;
	int r = 0;

	if (depth > RM_RF_MAX_DEPTH)
		return -ELOOP;

	d = opendir_fd(dirfd);
	if (!d)
		return negative_errno();

	while ((errno = 0, de = readdir(d))) {
		struct stat st;

		if (streq(de->d_name, ".") || streq(de->d_name, ".."))
			continue;
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT && r == 0)
				r = negative_errno();
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			int subfd, q;

			if (st.st_dev != dev) {
				/* A mount inside the volume: never delete across it. */
				if (r == 0)
					r = -EXDEV;
				continue;
			}
			subfd = openat(dirfd, de->d_name,
				       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME);
			if (subfd < 0 && errno == EPERM)
				subfd = openat(dirfd, de->d_name,
					       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (subfd < 0) {
				/* Swapped for a symlink or file under us: unlink whatever is there now. */
				if (errno == ENOTDIR || errno == ELOOP) {
					if (unlinkat(dirfd, de->d_name, 0) < 0 && errno != ENOENT && r == 0)
						r = negative_errno();
				} else if (errno != ENOENT && r == 0)
					r = negative_errno();
				continue;
			}
			struct stat st2;
			if (fstat(subfd, &st2) < 0 || st2.st_dev != dev) {
				(void)close(subfd);
				if (r == 0)
					r = -EXDEV;
				continue;
			}
			/* A mode-0000 directory must still be emptied: we are its owner's root. */
			q = rm_rf_children_depth(subfd, dev, depth + 1);
			(void)close(subfd);
			if (q < 0 && r == 0)
				r = q;
			if (unlinkat(dirfd, de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
				r = negative_errno();
		} else {
			if (unlinkat(dirfd, de->d_name, 0) < 0 && errno != ENOENT && r == 0)
				r = negative_errno();
		}
	}
	if (errno != 0 && r == 0)
		r = negative_errno();
	closedir(d);
	return r;
}

int rm_rf_children(int dirfd)
{
	struct stat st;

	if (fstat(dirfd, &st) < 0)
		return negative_errno();
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	return rm_rf_children_depth(dirfd, st.st_dev, 0);
}

int rm_rf_at(int dirfd, const char *name)
{
	_cleanup_close_ int fd = -EBADF;
	struct stat parent, st;
	int r;

	if (fstat(dirfd, &parent) < 0)
		return negative_errno();
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		if (errno == ENOTDIR || errno == ELOOP)
			return unlinkat(dirfd, name, 0) < 0 ? negative_errno() : 0;
		return negative_errno();
	}
	if (fstat(fd, &st) < 0)
		return negative_errno();
	if (st.st_dev != parent.st_dev)
		return -EXDEV;
	r = rm_rf_children_depth(fd, st.st_dev, 0);
	if (r < 0)
		return r;
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return negative_errno();
	return 0;
}

int remove_atomic_tmp_files(int dirfd)
{
	DIR *d;
	struct dirent *de;
	int n = 0;

	d = opendir_fd(dirfd);
	if (!d)
		return negative_errno();
	while ((de = readdir(d)))
		if (is_atomic_tmp_name(de->d_name) && unlinkat(dirfd, de->d_name, 0) == 0)
			n++;
	closedir(d);
	if (n > 0)
		(void)fsync(dirfd);
	return n;
}
