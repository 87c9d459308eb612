/* SPDX-License-Identifier: MIT */
/*
 * Tests of src/pool/quota.c against a real XFS on a loop device.
 *
 * Each test that needs a filesystem makes its own: a sparse 300 MiB image
 * (mkfs.xfs's minimum), mkfs.xfs, a loop device with LO_FLAGS_AUTOCLEAR, and a
 * mount in a private mount namespace of the test's own worker process. The
 * image is unlinked as soon as the loop device holds it, so when the worker
 * exits, however it exits, the namespace goes away, the filesystem is
 * unmounted and the loop device detaches itself: nothing is left behind.
 *
 * The host kernel of the CI machines has no CONFIG_XFS_QUOTA, so the tests
 * that need enforcement skip there; tests/qemu/run.sh runs them in a guest
 * with Debian's stock kernel. Needs root and mkfs.xfs (xfsprogs).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/loop.h>
#include <sched.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/teardown.h"
#include "pool/quota.h"

extern char **environ;

#define MiB (UINT64_C(1) << 20)
#define IMAGE_SIZE (300 * MiB)
#define NO_QUOTA_REASON \
	"kernel without XFS project quota (CONFIG_XFS_QUOTA); runs in the qemu guest via tests/qemu/run.sh"

static struct {
	char dir[256];       /* mkdtemp() directory holding everything below */
	char mnt[PATH_MAX];  /* mount point of the scratch XFS */
	char bind[PATH_MAX]; /* bind-mount target, if used */
	int rootfd;
	bool mounted, bound;
} s = { .rootfd = -1 };

static void scratch_cleanup(void)
{
	if (s.rootfd >= 0)
		(void)close(s.rootfd);
	s.rootfd = -1;
	if (s.bound)
		(void)umount2(s.bind, MNT_DETACH);
	s.bound = false;
	if (s.mounted)
		(void)umount(s.mnt); /* the loop device autoclears */
	s.mounted = false;
	if (s.bind[0])
		(void)rmdir(s.bind);
	if (s.mnt[0])
		(void)rmdir(s.mnt);
	if (s.dir[0]) {
		char img[PATH_MAX + 8];

		snprintf(img, sizeof(img), "%s/img", s.dir);
		(void)unlink(img);
		(void)rmdir(s.dir);
	}
	s.dir[0] = s.mnt[0] = s.bind[0] = '\0';
}

static void teardown(void)
{
	scratch_cleanup();
}

static int run_mkfs(const char *img)
{
	static const char *const candidates[] = { "mkfs.xfs", "/usr/sbin/mkfs.xfs", "/sbin/mkfs.xfs" };

	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
		char *argv[] = { (char *)candidates[i], (char *)"-q", (char *)"-f", (char *)img, NULL };
		posix_spawn_file_actions_t fa;
		pid_t pid;
		int r, status;

		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
		r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
		posix_spawn_file_actions_destroy(&fa);
		if (r == ENOENT)
			continue;
		if (r != 0)
			return -r;
		if (waitpid(pid, &status, 0) < 0)
			return -errno;
		return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
	}
	return -ENOENT;
}

/* Attaches @imgfd to a free loop device (autoclear); returns an open fd of it. */
static int loop_attach(int imgfd, char *ret_path, size_t pathlen)
{
	struct loop_config cfg = {
		.fd = (uint32_t)imgfd,
		.info = { .lo_flags = LO_FLAGS_AUTOCLEAR },
	};
	int ctl, r = -EBUSY;

	ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return -errno;

	/* Parallel test workers may race for the same free device: retry. */
	for (int attempt = 0; attempt < 64 && r == -EBUSY; attempt++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		int fd;

		if (n < 0) {
			r = -errno;
			break;
		}
		snprintf(ret_path, pathlen, "/dev/loop%d", n);
		fd = open(ret_path, O_RDWR | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT) {
			/* No devtmpfs node (yet): make our own next to the image. */
			snprintf(ret_path, pathlen, "%s/loop%d", s.dir, n);
			if (mknod(ret_path, S_IFBLK | 0600, makedev(7, n)) < 0 && errno != EEXIST) {
				r = -errno;
				break;
			}
			fd = open(ret_path, O_RDWR | O_CLOEXEC);
		}
		if (fd < 0) {
			r = -errno;
			break;
		}
		if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0) {
			(void)close(ctl);
			return fd;
		}
		r = -errno;
		(void)close(fd);
	}
	(void)close(ctl);
	return r;
}

/*
 * Makes and mounts a fresh XFS at s.mnt with mount data @opts; s.rootfd is
 * its root. Returns 0, or the mount(2) error (everything is cleaned up then).
 * Fails the test on any other setup error.
 */
static int scratch_mount(const char *opts)
{
	const char *tmp = teardown_tmpdir(getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	char img[PATH_MAX + 8], loopdev[PATH_MAX + 16];
	int imgfd, loopfd, r;

	/* Mounts made from here on exist only in this worker's namespace. */
	cr_assert_eq(unshare(CLONE_NEWNS), 0, "unshare(CLONE_NEWNS): %s (tests need root)", strerror(errno));
	cr_assert_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0, "make / private: %s", strerror(errno));

	r = snprintf(s.dir, sizeof(s.dir), "%s/nvmevol-test-quota.XXXXXX", tmp);
	cr_assert(r > 0 && (size_t)r < sizeof(s.dir), "TMPDIR is too long");
	cr_assert_not_null(mkdtemp(s.dir), "mkdtemp: %s", strerror(errno));
	snprintf(img, sizeof(img), "%s/img", s.dir);

	imgfd = open(img, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	cr_assert_geq(imgfd, 0, "create %s: %s", img, strerror(errno));
	cr_assert_eq(ftruncate(imgfd, (off_t)IMAGE_SIZE), 0, "ftruncate: %s", strerror(errno));
	r = run_mkfs(img);
	cr_assert_eq(r, 0, "mkfs.xfs %s: %s", img, r == -ENOENT ? "mkfs.xfs not found (install xfsprogs)" : strerror(-r));

	loopfd = loop_attach(imgfd, loopdev, sizeof(loopdev));
	(void)close(imgfd);
	cr_assert_geq(loopfd, 0, "attach a loop device: %s", strerror(-loopfd));
	(void)unlink(img); /* the loop device holds the only reference now */

	snprintf(s.mnt, sizeof(s.mnt), "%s/mnt", s.dir);
	cr_assert_eq(mkdir(s.mnt, 0755), 0, "mkdir %s: %s", s.mnt, strerror(errno));

	r = mount(loopdev, s.mnt, "xfs", MS_NOATIME | MS_NODIRATIME, opts);
	r = r < 0 ? -errno : 0;
	(void)close(loopfd); /* from now on the mount alone keeps the loop device */
	if (r < 0) {
		scratch_cleanup();
		return r;
	}
	s.mounted = true;

	s.rootfd = open(s.mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(s.rootfd, 0, "open %s: %s", s.mnt, strerror(errno));
	return 0;
}

/*
 * A prjquota-mounted scratch XFS, or a SKIP if the kernel cannot do project
 * quotas (the prjquota mount fails but a plain one works).
 */
static void scratch_mount_prjquota(void)
{
	bool available = false;
	int r;

	r = scratch_mount("prjquota");
	if (r < 0) {
		int r2;

		/* XFS built without quota support rejects the option with EINVAL. */
		cr_assert_eq(r, -EINVAL, "mount -o prjquota: %s", strerror(-r));
		r2 = scratch_mount("");
		cr_assert_eq(r2, 0, "mounting a fresh XFS fails even without quota: %s", strerror(-r2));
		scratch_cleanup();
		cr_skip_test(NO_QUOTA_REASON);
	}
	r = quota_probe(s.rootfd, &available);
	cr_assert_eq(r, 0, "quota_probe: %s", strerror(-r));
	cr_assert(available, "XFS mounted with prjquota, but quota_probe says unavailable");
}

/* Makes directory @name in the scratch root and returns an fd of it. */
static int make_dir(const char *name)
{
	int fd;

	cr_assert_eq(mkdirat(s.rootfd, name, 0755), 0, "mkdir %s: %s", name, strerror(errno));
	fd = openat(s.rootfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "open %s: %s", name, strerror(errno));
	return fd;
}

/*
 * Writes up to @bytes to a new file @name in @dirfd in 1 MiB chunks, then
 * fsyncs. Returns how much was written; *ret_errno is the errno that stopped
 * it (0 if everything was written).
 */
static uint64_t write_file(int dirfd, const char *name, uint64_t bytes, int *ret_errno)
{
	static char buf[1 << 20];
	uint64_t done = 0;
	int fd, err = 0;

	memset(buf, 0xa5, sizeof(buf));
	fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0, "create %s: %s", name, strerror(errno));
	while (done < bytes) {
		size_t len = bytes - done < sizeof(buf) ? (size_t)(bytes - done) : sizeof(buf);
		ssize_t n = write(fd, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			err = errno;
			break;
		}
		done += (uint64_t)n;
	}
	if (fsync(fd) < 0 && err == 0)
		err = errno;
	(void)close(fd);
	*ret_errno = err;
	return done;
}

/* Sum of the allocated bytes (st_blocks) of the regular files directly in @dirfd. */
static uint64_t dir_allocated(int dirfd)
{
	int fd = dup(dirfd);
	DIR *d;
	struct dirent *de;
	uint64_t sum = 0;

	cr_assert_geq(fd, 0);
	d = fdopendir(fd);
	cr_assert_not_null(d);
	rewinddir(d);
	while ((de = readdir(d))) {
		struct stat st;

		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
			sum += (uint64_t)st.st_blocks * 512;
	}
	closedir(d);
	return sum;
}

/* ---- pure --------------------------------------------------------------- */

Test(quota, next_free_id)
{
	const uint32_t m = QUOTA_PROJID_MIN;
	uint32_t used[] = { m + 1, m, m, m + 3, 5, m + 2 };
	static uint32_t many[5000];

	cr_assert_eq(quota_next_free_id(NULL, 0, m), m);
	cr_assert_eq(quota_next_free_id(NULL, 0, 0), 1, "ID 0 is never allocated");
	cr_assert_eq(quota_next_free_id(used, 6, m), m + 4, "unsorted, duplicates");
	cr_assert_eq(quota_next_free_id(used, 3, m), m + 2);
	cr_assert_eq(quota_next_free_id(used, 6, 1), 1, "IDs below min_id are ignored");
	cr_assert_eq(quota_next_free_id(used, 6, 5), 6);

	/* The first free ID beyond the first 4096-ID window, reversed order. */
	for (uint32_t i = 0; i < 5000; i++)
		many[i] = m + 4999 - i;
	cr_assert_eq(quota_next_free_id(many, 5000, m), m + 5000);
	many[4321] = 7; /* frees m + 678 */
	cr_assert_eq(quota_next_free_id(many, 5000, m), m + 678);

	/* The top of the range, and exhaustion. */
	uint32_t top[] = { QUOTA_PROJID_MAX - 1, QUOTA_PROJID_MAX };
	cr_assert_eq(quota_next_free_id(top, 1, QUOTA_PROJID_MAX - 1), QUOTA_PROJID_MAX);
	cr_assert_eq(quota_next_free_id(top, 2, QUOTA_PROJID_MAX - 1), 0);
	cr_assert_eq(quota_next_free_id(NULL, 0, UINT32_MAX), 0, "(uint32_t)-1 is never allocated");
}

Test(quota, argument_checks)
{
	QuotaUsage u;
	bool b;

	cr_assert_eq(quota_probe(-1, &b), -EBADF);
	cr_assert_eq(quota_probe(0, NULL), -EINVAL);
	cr_assert_eq(quota_set_limit(-1, 100000, 0, 0), -EBADF);
	cr_assert_eq(quota_get(-1, 100000, &u), -EBADF);
	cr_assert_eq(quota_set_project(-1, 100000), -EBADF);
	cr_assert_eq(quota_get_project(-1, NULL, NULL), -EBADF);
	cr_assert_eq(quota_set_limit(0, 0, MiB, 0), -EINVAL, "limits on project 0 would be the default limits");
	cr_assert_eq(quota_set_limit(0, UINT32_MAX, MiB, 0), -EINVAL);
	cr_assert_eq(quota_set_limit(0, 100000, UINT64_MAX, 0), -EINVAL);
}

/* ---- any kernel: XFS without quota ---------------------------------------- */

/*
 * On a kernel without CONFIG_XFS_QUOTA (the CI host) and on an XFS mounted
 * without prjquota (anywhere), the probe reports "unavailable" and the limit
 * calls fail instead of pretending to work.
 */
Test(quota, probe_without_prjquota, .fini = teardown)
{
	bool available = true;
	QuotaUsage u;
	int r;

	r = scratch_mount("");
	cr_assert_eq(r, 0, "mount a fresh XFS: %s", strerror(-r));

	r = quota_probe(s.rootfd, &available);
	cr_assert_eq(r, 0, "quota_probe: %s", strerror(-r));
	cr_assert_not(available, "project quota reported on an XFS mounted without prjquota");

	r = quota_set_limit(s.rootfd, QUOTA_PROJID_MIN, 8 * MiB, 0);
	cr_assert_lt(r, 0, "quota_set_limit succeeded without quota");
	cr_assert(r == -ENOSYS || r == -ESRCH || r == -EINVAL, "quota_set_limit: %s", strerror(-r));
	r = quota_get(s.rootfd, QUOTA_PROJID_MIN, &u);
	cr_assert_lt(r, 0, "quota_get succeeded without quota");

	/* Not XFS at all: the directory holding the image. */
	int fd = open(s.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	available = true;
	r = quota_probe(fd, &available);
	(void)close(fd);
	cr_assert_eq(r, 0, "quota_probe on %s: %s", s.dir, strerror(-r));
	cr_assert_not(available, "project quota reported for %s", s.dir);
}

/* Project IDs live in the inode: this works with or without quota support. */
Test(quota, project_id_roundtrip, .fini = teardown)
{
	uint32_t projid = 1;
	bool inherit = true;
	int r, vol, sub, f;

	r = scratch_mount("");
	cr_assert_eq(r, 0, "mount a fresh XFS: %s", strerror(-r));
	vol = make_dir("vol");

	r = quota_get_project(vol, &projid, &inherit);
	cr_assert_eq(r, 0, "quota_get_project: %s", strerror(-r));
	cr_assert_eq(projid, 0);
	cr_assert_not(inherit);

	r = quota_set_project(vol, QUOTA_PROJID_MIN + 7);
	cr_assert_eq(r, 0, "quota_set_project: %s", strerror(-r));
	r = quota_get_project(vol, &projid, &inherit);
	cr_assert_eq(r, 0);
	cr_assert_eq(projid, QUOTA_PROJID_MIN + 7);
	cr_assert(inherit);

	/* New entries inherit the ID; subdirectories inherit the flag too. */
	cr_assert_eq(mkdirat(vol, "sub", 0755), 0);
	sub = openat(vol, "sub", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(sub, 0);
	r = quota_get_project(sub, &projid, &inherit);
	cr_assert_eq(r, 0);
	cr_assert_eq(projid, QUOTA_PROJID_MIN + 7);
	cr_assert(inherit);

	f = openat(vol, "file", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	cr_assert_geq(f, 0);
	cr_assert_eq(quota_set_project(f, QUOTA_PROJID_MIN), -ENOTDIR);
	cr_assert_eq(quota_get_project(f, NULL, NULL), -ENOTDIR);
	(void)close(f);

	cr_assert_eq(quota_set_project(vol, UINT32_MAX), -EINVAL);

	/* 0 puts the directory back into the default project. */
	r = quota_set_project(sub, 0);
	cr_assert_eq(r, 0, "quota_set_project(0): %s", strerror(-r));
	r = quota_get_project(sub, &projid, &inherit);
	cr_assert_eq(r, 0);
	cr_assert_eq(projid, 0);
	cr_assert_not(inherit);

	(void)close(sub);
	(void)close(vol);
}

/* ---- need CONFIG_XFS_QUOTA (the qemu guest) ------------------------------- */

Test(quota, probe_and_unused_id, .fini = teardown)
{
	QuotaUsage u;
	int r;

	scratch_mount_prjquota(); /* asserts quota_probe() == available */

	memset(&u, 0xff, sizeof(u));
	r = quota_get(s.rootfd, 4000000000U, &u);
	cr_assert_eq(r, 0, "quota_get of an unused ID: %s", strerror(-r));
	cr_assert_eq(u.used_bytes, 0);
	cr_assert_eq(u.used_inodes, 0);
	cr_assert_eq(u.bytes_hard, 0);
	cr_assert_eq(u.inodes_hard, 0);
}

/* F1 + F2: the limit is set and enforced; usage is reported. */
Test(quota, byte_limit_enforced, .fini = teardown)
{
	const uint32_t id = QUOTA_PROJID_MIN + 1;
	const uint64_t limit = 8 * MiB;
	QuotaUsage u;
	uint64_t n, alloc;
	int r, vol, err;

	scratch_mount_prjquota();
	vol = make_dir("vol");
	r = quota_set_project(vol, id);
	cr_assert_eq(r, 0, "quota_set_project: %s", strerror(-r));
	r = quota_set_limit(s.rootfd, id, limit, 0);
	cr_assert_eq(r, 0, "quota_set_limit: %s", strerror(-r));

	r = quota_get(s.rootfd, id, &u);
	cr_assert_eq(r, 0, "quota_get: %s", strerror(-r));
	cr_assert_eq(u.bytes_hard, limit);
	cr_assert_eq(u.inodes_hard, 0);
	cr_assert_eq(u.used_inodes, 1, "the directory itself is charged: %" PRIu64, u.used_inodes);

	/* Half the limit fits, and is accounted. */
	n = write_file(vol, "half", limit / 2, &err);
	cr_assert_eq(err, 0, "writing %" PRIu64 " bytes under a %" PRIu64 "-byte limit: %s", limit / 2, limit,
		     strerror(err));
	cr_assert_eq(n, limit / 2);
	r = quota_get(s.rootfd, id, &u);
	cr_assert_eq(r, 0);
	cr_assert_geq(u.used_bytes, limit / 2, "used %" PRIu64, u.used_bytes);
	cr_assert_leq(u.used_bytes, limit / 2 + 256 * 1024, "used %" PRIu64, u.used_bytes);
	cr_assert_eq(u.used_inodes, 2);

	/* Deleting gives the space back. */
	cr_assert_eq(unlinkat(vol, "half", 0), 0);
	cr_assert_eq(syncfs(s.rootfd), 0);
	for (int i = 0; i < 50; i++) { /* XFS frees unlinked inodes in the background */
		r = quota_get(s.rootfd, id, &u);
		cr_assert_eq(r, 0);
		if (u.used_bytes <= 64 * 1024)
			break;
		usleep(100 * 1000);
	}
	cr_assert_leq(u.used_bytes, 64 * 1024, "usage after delete: %" PRIu64, u.used_bytes);

	/* More than the limit does not fit: ENOSPC (XFS) or EDQUOT. */
	n = write_file(vol, "over", limit + MiB, &err);
	cr_assert(err == ENOSPC || err == EDQUOT, "writing %" PRIu64 " bytes under a %" PRIu64 "-byte limit: %s",
		  limit + MiB, limit, err ? strerror(err) : "no error");
	cr_assert_leq(n, limit, "wrote %" PRIu64 " bytes", n);
	cr_assert_geq(n, limit - MiB, "stopped far below the limit: %" PRIu64 " bytes", n);

	alloc = dir_allocated(vol);
	cr_assert_leq(alloc, limit, "the directory holds %" PRIu64 " bytes", alloc);
	r = quota_get(s.rootfd, id, &u);
	cr_assert_eq(r, 0);
	cr_assert_leq(u.used_bytes, limit, "used %" PRIu64, u.used_bytes);
	cr_assert_geq(u.used_bytes, n, "used %" PRIu64 ", written %" PRIu64, u.used_bytes, n);

	(void)close(vol);
}

Test(quota, inode_limit_enforced, .fini = teardown)
{
	const uint32_t id = QUOTA_PROJID_MIN + 2;
	QuotaUsage u;
	int r, vol, created = 0, err = 0;

	scratch_mount_prjquota();
	vol = make_dir("vol");
	cr_assert_eq(quota_set_project(vol, id), 0);
	r = quota_set_limit(s.rootfd, id, 0, 10);
	cr_assert_eq(r, 0, "quota_set_limit: %s", strerror(-r));

	for (int i = 0; i < 20; i++) {
		char name[16];
		int fd;

		snprintf(name, sizeof(name), "f%d", i);
		fd = openat(vol, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0) {
			err = errno;
			break;
		}
		(void)close(fd);
		created++;
	}
	cr_assert(err == ENOSPC || err == EDQUOT, "creating files under a 10-inode limit: %s",
		  err ? strerror(err) : "no error");
	cr_assert_eq(created, 9, "the directory counts as one of the 10 inodes; created %d files", created);

	r = quota_get(s.rootfd, id, &u);
	cr_assert_eq(r, 0);
	cr_assert_eq(u.used_inodes, 10);
	cr_assert_eq(u.inodes_hard, 10);
	cr_assert_eq(u.bytes_hard, 0);
	(void)close(vol);
}

/* F3: statfs() of the directory (and of a bind mount of it) shows the limit. */
Test(quota, statfs_shows_limit_and_clear, .fini = teardown)
{
	const uint32_t id = QUOTA_PROJID_MIN + 3;
	const uint64_t limit = 8 * MiB;
	struct statfs st, whole;
	QuotaUsage u;
	uint64_t n;
	int r, vol, err;

	scratch_mount_prjquota();
	cr_assert_eq(fstatfs(s.rootfd, &whole), 0);
	vol = make_dir("vol");
	cr_assert_eq(quota_set_project(vol, id), 0);
	r = quota_set_limit(s.rootfd, id, limit, 1000);
	cr_assert_eq(r, 0, "quota_set_limit: %s", strerror(-r));
	n = write_file(vol, "data", 2 * MiB, &err);
	cr_assert_eq(err, 0);
	cr_assert_eq(n, 2 * MiB);

	cr_assert_eq(fstatfs(vol, &st), 0);
	cr_assert_eq((uint64_t)st.f_blocks * (uint64_t)st.f_bsize, limit, "total %" PRIu64,
		     (uint64_t)st.f_blocks * (uint64_t)st.f_bsize);
	cr_assert_leq((uint64_t)st.f_bfree * (uint64_t)st.f_bsize, limit - 2 * MiB);
	cr_assert_geq((uint64_t)st.f_bfree * (uint64_t)st.f_bsize, limit - 2 * MiB - 256 * 1024);
	cr_assert_eq(st.f_files, 1000);

	snprintf(s.bind, sizeof(s.bind), "%s/bind", s.dir);
	cr_assert_eq(mkdir(s.bind, 0755), 0);
	char src[PATH_MAX + 8];
	snprintf(src, sizeof(src), "%s/vol", s.mnt);
	cr_assert_eq(mount(src, s.bind, NULL, MS_BIND, NULL), 0, "bind mount: %s", strerror(errno));
	s.bound = true;
	cr_assert_eq(statfs(s.bind, &st), 0);
	cr_assert_eq((uint64_t)st.f_blocks * (uint64_t)st.f_bsize, limit, "total through the bind mount %" PRIu64,
		     (uint64_t)st.f_blocks * (uint64_t)st.f_bsize);

	/* Clearing: no limits left, statfs shows the whole filesystem again. */
	r = quota_set_limit(s.rootfd, id, 0, 0);
	cr_assert_eq(r, 0, "clearing the limits: %s", strerror(-r));
	r = quota_get(s.rootfd, id, &u);
	cr_assert_eq(r, 0);
	cr_assert_eq(u.bytes_hard, 0);
	cr_assert_eq(u.inodes_hard, 0);
	cr_assert_geq(u.used_bytes, 2 * MiB, "usage is still accounted");
	cr_assert_eq(statfs(s.bind, &st), 0);
	cr_assert_eq(st.f_blocks, whole.f_blocks, "statfs after clearing: %llu blocks, filesystem %llu",
		     (unsigned long long)st.f_blocks, (unsigned long long)whole.f_blocks);

	/* And writing beyond the old limit works now. */
	n = write_file(vol, "more", limit, &err);
	cr_assert_eq(err, 0, "writing after clearing the limit: %s", strerror(err));
	(void)close(vol);
}
