/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <limits.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "util/alloc-util.h"
#include "util/fs-util.h"
#include "util/io-util.h"
#include "util/macro.h"

/* fdopendir() that takes @fd over also when it fails (errno kept). */
static DIR *fdopendir_or_close(int fd)
{
	DIR *d = fdopendir(fd);

	if (!d) {
		int saved = errno;
		(void)close(fd);
		errno = saved;
	}
	return d;
}

DIR *opendir_fd(int dirfd)
{
	int dupfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	DIR *d;

	if (dupfd < 0)
		return NULL;
	d = fdopendir_or_close(dupfd);
	if (!d)
		return NULL;
	/* The duplicate shares the file offset: start from the top whatever was read before. */
	rewinddir(d);
	return d;
}

int dir_foreach_entry(int dirfd, int (*cb)(const char *name, uint64_t ino, void *userdata), void *userdata)
{
	struct dirent *de;
	DIR *d = opendir_fd(dirfd);
	int r = 0;

	if (!d)
		return negative_errno();
	while (r >= 0 && (errno = 0, de = readdir(d)))
		if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
			r = cb(de->d_name, (uint64_t)de->d_ino, userdata);
	if (r >= 0 && errno != 0)
		r = negative_errno();
	closedir(d);
	return r < 0 ? r : 0;
}

typedef struct NameCallback {
	int (*cb)(const char *name, void *userdata);
	void *userdata;
} NameCallback;

static int name_only(const char *name, uint64_t ino, void *userdata)
{
	NameCallback *c = userdata;

	return c->cb(name, c->userdata);
}

int dir_foreach_name(int dirfd, int (*cb)(const char *name, void *userdata), void *userdata)
{
	return dir_foreach_entry(dirfd, name_only, &(NameCallback){ cb, userdata });
}

typedef struct NameList {
	char **names;
	size_t n, cap;
	uint64_t *mem, mem_max;
} NameList;

static int name_list_add(const char *name, void *userdata)
{
	NameList *l = userdata;

	*l->mem += strlen(name) + 1 + sizeof(char *);
	if (*l->mem > l->mem_max)
		return -ENOBUFS;
	if (GROW_ARRAY(l->names, l->cap, l->n + 1, 64) < 0 || !(l->names[l->n] = strdup(name)))
		return -ENOMEM;
	l->n++;
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int dir_read_names(int dirfd, bool sorted, uint64_t *mem, uint64_t mem_max, char ***ret_names, size_t *ret_n)
{
	NameList l = { .mem = mem, .mem_max = mem_max };
	int r = dir_foreach_name(dirfd, name_list_add, &l);

	if (r < 0) {
		names_free(l.names, l.n);
		return r;
	}
	if (sorted && l.n > 1)
		qsort(l.names, l.n, sizeof(*l.names), cmp_names);
	*ret_names = l.names;
	*ret_n = l.n;
	return 0;
}

void names_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

bool is_atomic_tmp_name(const char *name)
{
	return name[0] == '.' && strstr(name, ".tmp.") != NULL;
}

/*
 * Test builds: NVMEVOL_TEST_SKIP_FSYNC=file leaves out the file's fsync before
 * its rename (the directory's stays), the missing flush that
 * tests/reliability/powerloss.py --sabotage must find; =snapshot only for the
 * files in a directory under nvmevol/snapshots/ (the snapshot records);
 * =fence only for a record that holds a fence ("moved_to": the fence's own
 * write, and any later one while the volume stays fenced).
 */
static bool test_skip_file_fsync(int dirfd, const void *buf, size_t len)
{
#if defined(NVMEVOL_TEST_HOOKS) && NVMEVOL_TEST_HOOKS
	const char *e = getenv("NVMEVOL_TEST_SKIP_FSYNC");
	char link[64], path[PATH_MAX];
	ssize_t n;

	if (!e)
		return false;
	if (streq(e, "file"))
		return true;
	if (streq(e, "fence"))
		return memmem(buf, len, "\"moved_to\"", strlen("\"moved_to\"")) != NULL;
	if (!streq(e, "snapshot"))
		return false;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n < 0)
		return false;
	path[n] = '\0';
	return strstr(path, "/nvmevol/snapshots/") != NULL;
#else
	(void)dirfd;
	(void)buf;
	(void)len;
	return false;
#endif
}

int replace_tmp_open_at(int dirfd, const char *name, mode_t mode, char ret_tmp[static REPLACE_TMP_NAME_MAX])
{
	uint64_t rnd = 0;
	int fd;

	if (strlen(name) > 255 - 24)
		return -ENAMETOOLONG;
	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) < 0)
		rnd = (uint64_t)getpid() ^ (uint64_t)(uintptr_t)ret_tmp;
	snprintf(ret_tmp, REPLACE_TMP_NAME_MAX, ".%s.tmp.%016llx", name, (unsigned long long)rnd);

	fd = openat(dirfd, ret_tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	return fd < 0 ? negative_errno() : fd;
}

int replace_tmp_finish_at(int dirfd, const char *tmp, const char *name, int r, bool durable)
{
	if (r >= 0 && renameat(dirfd, tmp, dirfd, name) < 0)
		r = negative_errno();
	if (r < 0) {
		(void)unlinkat(dirfd, tmp, 0);
		return r;
	}
	/* The rename is only durable once the directory itself is synced. */
	if (durable && fsync(dirfd) < 0)
		return negative_errno();
	return 0;
}

static int replace_file_at(int dirfd, const char *name, const void *buf, size_t len, mode_t mode, bool durable)
{
	char tmp[REPLACE_TMP_NAME_MAX];
	int fd, r;

	fd = replace_tmp_open_at(dirfd, name, mode, tmp);
	if (fd < 0)
		return fd;
	r = write_all(fd, buf, len);
	if (r == 0 && durable && !test_skip_file_fsync(dirfd, buf, len) && fsync(fd) < 0)
		r = negative_errno();
	if (close(fd) < 0 && r == 0)
		r = negative_errno();
	return replace_tmp_finish_at(dirfd, tmp, name, r, durable);
}

int write_file_atomic_at(int dirfd, const char *name, const void *buf, size_t len, mode_t mode)
{
	return replace_file_at(dirfd, name, buf, len, mode, true);
}

int write_file_replace_at(int dirfd, const char *name, const void *buf, size_t len, mode_t mode)
{
	return replace_file_at(dirfd, name, buf, len, mode, false);
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
		/*
		 * A regular file's read comes up short only at its end: once it has the
		 * size fstat gave and left room, no read that returns 0 is needed (one
		 * system call fewer per file: start-up reads two per volume). Not for a
		 * size of 0, which is what procfs reports for files that have content.
		 */
		if (st.st_size > 0 && len < cap && len >= (size_t)st.st_size)
			break;
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

int mkdirat_exist_ok(int dirfd, const char *name, mode_t mode)
{
	struct stat st;

	/* Look first: the usual case changes nothing on disk (and so cannot fail on a sick disk). */
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
	if (errno != ENOENT)
		return negative_errno();
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

/*
 * Recursive removal with a bounded number of fds, whatever the depth. The
 * deepest RM_RF_OPEN_MAX directories on the current path are held open as DIR
 * streams; a shallower one is closed when the walk descends further, and
 * re-opened on the way back up through "..", accepted only if its dev/ino is
 * the one remembered for that level (a directory moved away underneath the
 * walk makes it stop with -ESTALE instead of deleting in its new place). A
 * re-opened directory is read again from its start. Every level's name is
 * kept for the whole time it is on the path (not only the open window's):
 * it is what the parent's rmdir needs on the way back up. Memory: an inode
 * number, an offset and the name per level of depth, plus one inode number
 * per directory that could not be emptied.
 */
#define RM_RF_OPEN_MAX 16

/* Which mount a file is on: st_dev alone misses a bind mount of the same filesystem. */
typedef struct FileMount {
	dev_t dev;
	uint64_t mnt_id; /* 0 if the kernel does not say */
	ino_t ino;
} FileMount;

static int file_mount_of(int fd, FileMount *ret)
{
	struct statx sx;

	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_INO | STATX_MNT_ID, &sx) < 0)
		return negative_errno();
	*ret = (FileMount){
		.dev = makedev(sx.stx_dev_major, sx.stx_dev_minor),
		.mnt_id = (sx.stx_mask & STATX_MNT_ID) ? sx.stx_mnt_id : 0,
		.ino = sx.stx_ino,
	};
	return 0;
}

static bool file_mount_same(const FileMount *a, const FileMount *b)
{
	return a->dev == b->dev && a->mnt_id == b->mnt_id;
}

typedef struct RmRfLevel {
	ino_t ino;	 /* the directory at this level of the current path */
	size_t name_off; /* its name in the level above, in RmRf.names (unused for the top) */
} RmRfLevel;

typedef struct RmRf {
	FileMount top;
	RmRfLevel *levels; /* levels[L]: level L of the current path (0: the top) */
	size_t cap_levels;
	char *names; /* the names of levels 1..depth, each NUL-terminated, in order */
	size_t len_names, cap_names;
	size_t depth;	/* the level being read */
	size_t low;	/* levels low..depth have an open stream */
	size_t failed;	/* levels below this could not be emptied (so cannot be removed) */
	DIR *open[RM_RF_OPEN_MAX];
	ino_t *kept; /* directories left non-empty: never entered again */
	size_t n_kept, cap_kept;
	int r;	/* the first error */
} RmRf;

static DIR **rm_rf_slot(RmRf *s, size_t level)
{
	return &s->open[level % RM_RF_OPEN_MAX];
}

/* Records the first error; the current level (so every level above it) cannot be removed. */
static void rm_rf_fail(RmRf *s, int r)
{
	if (s->r == 0)
		s->r = r;
	s->failed = s->depth + 1;
}

static bool rm_rf_is_kept(const RmRf *s, ino_t ino)
{
	for (size_t i = 0; i < s->n_kept; i++)
		if (s->kept[i] == ino)
			return true;
	return false;
}

/* Enters directory @name of the current level (already opened as @fd). */
static int rm_rf_push(RmRf *s, int fd, ino_t ino, const char *name)
{
	size_t len = strlen(name) + 1;
	DIR *d;

	if (GROW_ARRAY(s->levels, s->cap_levels, s->depth + 2, 64) < 0 ||
	    GROW_ARRAY(s->names, s->cap_names, s->len_names + len, 1024) < 0) {
		(void)close(fd);
		return -ENOMEM;
	}
	d = fdopendir_or_close(fd);
	if (!d)
		return negative_errno();
	s->depth++;
	s->levels[s->depth] = (RmRfLevel){ .ino = ino, .name_off = s->len_names };
	memcpy(s->names + s->len_names, name, len);
	s->len_names += len;
	if (s->depth - s->low + 1 > RM_RF_OPEN_MAX) {
		closedir(*rm_rf_slot(s, s->low));
		s->low++;
	}
	*rm_rf_slot(s, s->depth) = d;
	return 0;
}

/* Leaves the current level (fully read) for its parent, and removes it if it is empty. */
static int rm_rf_pop(RmRf *s)
{
	size_t level = s->depth;
	DIR *d = *rm_rf_slot(s, level);
	const char *name = s->names + s->levels[level].name_off;
	bool emptied = s->failed <= level;
	int pfd;

	if (s->low == level) {
		/* The parent's stream was closed to bound the fds: re-open it through "..". */
		FileMount fm;
		DIR *pd;

		pfd = openat(dirfd(d), "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (pfd < 0)
			return negative_errno();
		if (file_mount_of(pfd, &fm) < 0 || !file_mount_same(&fm, &s->top) || fm.ino != s->levels[level - 1].ino) {
			(void)close(pfd);
			return -ESTALE;
		}
		pd = fdopendir_or_close(pfd);
		if (!pd)
			return negative_errno();
		*rm_rf_slot(s, level - 1) = pd;
		s->low = level - 1;
	}
	closedir(d);
	s->depth--;
	if (emptied && unlinkat(dirfd(*rm_rf_slot(s, s->depth)), name, AT_REMOVEDIR) < 0 && errno != ENOENT) {
		rm_rf_fail(s, negative_errno());
		emptied = false;
	}
	s->len_names = s->levels[level].name_off;
	if (!emptied) {
		/* It stays, so its parent cannot be removed either; and it is never entered again. */
		s->failed = level;
		if (GROW_ARRAY(s->kept, s->cap_kept, s->n_kept + 1, 64) < 0)
			return -ENOMEM;
		s->kept[s->n_kept++] = s->levels[level].ino;
	}
	return 0;
}

/* Handles one entry of the current level: unlinks it, or enters it if it is a directory. */
static int rm_rf_entry(RmRf *s, const char *name)
{
	int fd = dirfd(*rm_rf_slot(s, s->depth)), subfd;
	FileMount fm;
	struct stat st;

	if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT)
			rm_rf_fail(s, negative_errno());
		return 0;
	}
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(fd, name, 0) < 0 && errno != ENOENT)
			rm_rf_fail(s, negative_errno());
		return 0;
	}
	if (st.st_dev != s->top.dev) {
		/* A mount inside the tree: never delete across it. */
		rm_rf_fail(s, -EXDEV);
		return 0;
	}
	if (rm_rf_is_kept(s, st.st_ino)) {
		/* Seen again after a re-open: it could not be emptied, and still cannot be removed. */
		s->failed = s->depth + 1;
		return 0;
	}
	subfd = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME);
	if (subfd < 0 && errno == EPERM)
		subfd = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (subfd < 0) {
		/* Swapped for a symlink or file under us: unlink whatever is there now. */
		if (errno == ENOTDIR || errno == ELOOP) {
			if (unlinkat(fd, name, 0) < 0 && errno != ENOENT)
				rm_rf_fail(s, negative_errno());
		} else if (errno != ENOENT)
			rm_rf_fail(s, negative_errno());
		return 0;
	}
	if (file_mount_of(subfd, &fm) < 0 || !file_mount_same(&fm, &s->top)) {
		/* A bind mount of the same filesystem only shows in the mount ID. */
		(void)close(subfd);
		rm_rf_fail(s, -EXDEV);
		return 0;
	}
	/* A mode-0000 directory is still entered: we are root. */
	return rm_rf_push(s, subfd, fm.ino, name);
}

static void gate_enter(const RmRfGate *gate)
{
	if (gate)
		gate->enter();
}

static void gate_leave(const RmRfGate *gate)
{
	if (gate)
		gate->leave();
}

static int rm_rf_children_gated(int dirfd, const RmRfGate *gate)
{
	RmRf s = { .r = 0 };
	struct stat st;
	int r = 0;

	if (fstat(dirfd, &st) < 0)
		return negative_errno();
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	r = file_mount_of(dirfd, &s.top);
	if (r < 0)
		return r;
	if (GROW_ARRAY(s.levels, s.cap_levels, 1, 64) < 0)
		return -ENOMEM;
	s.levels[0] = (RmRfLevel){ .ino = s.top.ino };
	s.open[0] = opendir_fd(dirfd);
	if (!s.open[0]) {
		free(s.levels);
		return negative_errno();
	}

	for (;;) {
		struct dirent *de;

		gate_enter(gate);
		errno = 0;
		de = readdir(*rm_rf_slot(&s, s.depth));
		if (!de) {
			if (errno != 0)
				rm_rf_fail(&s, negative_errno());
			if (s.depth == 0) {
				gate_leave(gate);
				break;
			}
			r = rm_rf_pop(&s);
		} else if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
			r = rm_rf_entry(&s, de->d_name);
		gate_leave(gate);
		if (r < 0)
			break;
	}
	for (size_t l = s.low; l <= s.depth; l++)
		closedir(*rm_rf_slot(&s, l));
	free(s.levels);
	free(s.names);
	free(s.kept);
	return r < 0 ? r : s.r;
}

int rm_rf_children(int dirfd)
{
	return rm_rf_children_gated(dirfd, NULL);
}

int rm_rf_at(int dirfd, const char *name)
{
	return rm_rf_at_gated(dirfd, name, NULL);
}

int rm_rf_at_gated(int dirfd, const char *name, const RmRfGate *gate)
{
	_cleanup_close_ int fd = -EBADF;
	FileMount parent, fm;
	int r;

	r = file_mount_of(dirfd, &parent);
	if (r < 0)
		return r;
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		if (errno == ENOTDIR || errno == ELOOP) {
			gate_enter(gate);
			r = unlinkat(dirfd, name, 0) < 0 ? negative_errno() : 0;
			gate_leave(gate);
			return r;
		}
		return negative_errno();
	}
	r = file_mount_of(fd, &fm);
	if (r < 0)
		return r;
	if (!file_mount_same(&fm, &parent))
		return -EXDEV;
	r = rm_rf_children_gated(fd, gate);
	if (r < 0)
		return r;
	gate_enter(gate);
	r = unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? negative_errno() : 0;
	gate_leave(gate);
	return r;
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
