/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loopxfs.h"
#include "teardown.h"

extern char **environ;

/* Reads what is left in @fd into @buf (keeping what fits, draining the rest), without trailing newlines. */
static void read_all(int fd, char *buf, size_t len)
{
	size_t used = 0;

	for (;;) {
		char tmp[256];
		ssize_t n = read(fd, tmp, sizeof(tmp));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n && used + 1 < len; i++)
			buf[used++] = tmp[i];
	}
	buf[used] = '\0';
	while (used > 0 && (buf[used - 1] == '\n' || buf[used - 1] == '\r'))
		buf[--used] = '\0';
}

int loopxfs_spawn_capture(const char *const *argv, char *out, size_t out_len, char *err, size_t err_len)
{
	posix_spawn_file_actions_t fa;
	int pipefd[2] = { -1, -1 }, errfd = -1, st, r;
	char errpath[] = "/tmp/nvmevol-spawn-err.XXXXXX";
	pid_t pid;

	if ((out && out_len == 0) || (err && err_len == 0))
		return -EINVAL;
	if (out) {
		out[0] = '\0';
		if (pipe2(pipefd, O_CLOEXEC) < 0)
			return -errno;
	}
	if (err) {
		/* A file, not a second pipe: one reader loop, no deadlock on a chatty stderr. */
		err[0] = '\0';
		errfd = mkostemp(errpath, O_CLOEXEC);
		if (errfd < 0) {
			r = errno;
			goto fail_pipe;
		}
		(void)unlink(errpath);
	}
	r = posix_spawn_file_actions_init(&fa);
	if (r != 0)
		goto fail_pipe;
	if (out)
		r = posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
	else
		r = posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
	if (r == 0 && err)
		r = posix_spawn_file_actions_adddup2(&fa, errfd, STDERR_FILENO);
	if (r == 0)
		r = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (r != 0)
		goto fail_pipe;

	if (out) {
		(void)close(pipefd[1]);
		read_all(pipefd[0], out, out_len);
		(void)close(pipefd[0]);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (err) {
		(void)lseek(errfd, 0, SEEK_SET);
		read_all(errfd, err, err_len);
		(void)close(errfd);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);

fail_pipe:
	if (out) {
		(void)close(pipefd[0]);
		(void)close(pipefd[1]);
	}
	if (errfd >= 0)
		(void)close(errfd);
	return -r;
}

int loopxfs_spawn(const char *const *argv, char *out, size_t out_len)
{
	return loopxfs_spawn_capture(argv, out, out_len, NULL, 0);
}

/* A tool's exit status as -errno: non-zero exit becomes -EIO. */
static int run(const char *const *argv, char *out, size_t out_len)
{
	int r = loopxfs_spawn(argv, out, out_len);

	if (r < 0)
		return r;
	return r == 0 ? 0 : -EIO;
}
#define RUN(...) run((const char *const[]){ __VA_ARGS__, NULL }, NULL, 0)

static int make_label(char *buf, size_t len, const char *label)
{
	uint32_t rnd;

	if (label) {
		if (strlen(label) == 0 || strlen(label) > LOOPXFS_LABEL_MAX || strlen(label) >= len)
			return -EINVAL;
		strcpy(buf, label);
		return 0;
	}
	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
		rnd = (uint32_t)getpid() ^ (uint32_t)time(NULL);
	(void)snprintf(buf, len, "nvlx%08x", rnd);
	return 0;
}

int loopxfs_mount(LoopXfs *l, const char *mount_options)
{
	char mnt[PATH_MAX];
	int r;

	if (l->device[0] == '\0' || l->mountpoint[0] != '\0')
		return -EINVAL;
	if ((size_t)snprintf(mnt, sizeof(mnt), "%s/mnt", l->dir) >= sizeof(mnt))
		return -ENAMETOOLONG;
	if (mkdir(mnt, 0755) < 0 && errno != EEXIST)
		return -errno;
	r = RUN("mount", "-t", "xfs", "-o", mount_options ? mount_options : LOOPXFS_DEFAULT_MOUNT_OPTIONS,
		l->device, mnt);
	if (r < 0)
		return r;
	strcpy(l->mountpoint, mnt);
	return 0;
}

int loopxfs_umount_path(const char *path)
{
	/* A process that just closed a file there may still be exiting: retry for up to 2 s. */
	for (int i = 0;; i++) {
		if (umount2(path, UMOUNT_NOFOLLOW) == 0 || errno == EINVAL || errno == ENOENT)
			return 0;
		if (errno != EBUSY || i >= 40)
			return -errno;
		(void)nanosleep(&(struct timespec){ .tv_nsec = 50 * 1000 * 1000 }, NULL);
	}
}

int loopxfs_umount(LoopXfs *l)
{
	int r;

	if (l->mountpoint[0] == '\0')
		return 0;
	r = loopxfs_umount_path(l->mountpoint);
	if (r < 0)
		return r;
	(void)rmdir(l->mountpoint);
	l->mountpoint[0] = '\0';
	return 0;
}

/* 1 when @device is bound to the file (@dev, @ino), 0 when free or bound to another file, else -errno. */
static int bound_to(const char *device, dev_t dev, ino_t ino)
{
	struct loop_info64 info;
	int fd = open(device, O_RDONLY | O_CLOEXEC), r;

	if (fd < 0)
		return errno == ENOENT || errno == ENXIO ? 0 : -errno;
	r = ioctl(fd, LOOP_GET_STATUS64, &info) < 0 ? (errno == ENXIO ? 0 : -errno)
						      : info.lo_device == (uint64_t)dev && info.lo_inode == (uint64_t)ino;
	(void)close(fd);
	return r;
}

int loopxfs_detach(const char *device, const char *image, char *why, size_t why_len)
{
	char said[512] = "";
	struct stat st;
	int status = -1, r;

	why[0] = '\0';
	if (stat(image, &st) < 0) {
		r = -errno;
		snprintf(why, why_len, "%s: cannot tell whether it is still bound to %s: %s", device, image, strerror(-r));
		return r;
	}
	for (int i = 0; i < 100; i++) {
		r = bound_to(device, st.st_dev, st.st_ino);
		if (r < 0) {
			snprintf(why, why_len, "%s: LOOP_GET_STATUS64: %s", device, strerror(-r));
			return r;
		}
		if (r == 0)
			return 0;
		if (i % 10 == 0)
			status = loopxfs_spawn_capture((const char *const[]){ "losetup", "-d", device, NULL }, NULL, 0,
						       said, sizeof(said));
		(void)nanosleep(&(struct timespec){ .tv_nsec = 100 * 1000 * 1000 }, NULL);
	}
	if (status == 0)
		snprintf(why, why_len, "%s is still bound to %s 10 s after losetup -d succeeded: the kernel still holds it",
			 device, image);
	else
		snprintf(why, why_len, "%s is still bound to %s: losetup -d exited %d: %s", device, image, status,
			 said[0] ? said : "(nothing on stderr)");
	return -EBUSY;
}

static void destroy_tracked(void *l)
{
	loopxfs_destroy(l);
}

int loopxfs_create_full(LoopXfs *ret, const char *label, uint64_t size_mb, const char *mount_options)
{
	LoopXfs l = { .size_mb = size_mb };
	const char *base = teardown_tmpdir("/var/tmp");
	int fd, r;

	if (size_mb < 300 || size_mb > 1024 * 1024)
		return -EINVAL;
	r = make_label(l.label, sizeof(l.label), label);
	if (r < 0)
		return r;
	if ((size_t)snprintf(l.dir, sizeof(l.dir), "%s/nvmevol-loopxfs.XXXXXX", base) >= sizeof(l.dir))
		return -ENAMETOOLONG;
	if (!mkdtemp(l.dir))
		return -errno;
	(void)snprintf(l.image, sizeof(l.image), "%s/image", l.dir);

	fd = open(l.image, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		r = -errno;
		goto fail;
	}
	/* Sparse: costs nothing until written. */
	r = ftruncate(fd, (off_t)(size_mb << 20)) < 0 ? -errno : 0;
	(void)close(fd);
	if (r < 0)
		goto fail;

	r = run((const char *const[]){ "losetup", "--find", "--show", "--direct-io=on", l.image, NULL },
		l.device, sizeof(l.device));
	if (r < 0 || strncmp(l.device, "/dev/loop", 9) != 0)
		/* A backing file on tmpfs (the qemu guest's /tmp) has no O_DIRECT. */
		r = run((const char *const[]){ "losetup", "--find", "--show", l.image, NULL }, l.device,
			sizeof(l.device));
	if (r < 0 || strncmp(l.device, "/dev/loop", 9) != 0) {
		l.device[0] = '\0';
		r = r < 0 ? r : -EIO;
		goto fail;
	}
	r = RUN("mkfs.xfs", "-q", "-f", "-L", l.label, l.device);
	if (r < 0)
		goto fail;
	if (mount_options) {
		r = loopxfs_mount(&l, mount_options);
		if (r < 0)
			goto fail;
	}
	*ret = l;
	teardown_track(destroy_tracked, ret);
	return 0;

fail:
	loopxfs_destroy(&l);
	return r;
}

int loopxfs_create(LoopXfs *ret, const char *label, uint64_t size_mb)
{
	return loopxfs_create_full(ret, label, size_mb, LOOPXFS_DEFAULT_MOUNT_OPTIONS);
}

void loopxfs_destroy(LoopXfs *l)
{
	char why[2048] = "", msg[1024];
	int r;

	if (!l)
		return;
	teardown_untrack(l);
	if (loopxfs_umount(l) < 0) {
		/* Still busy after 2 s: let it go lazily; the detach below waits for the last user. */
		(void)umount2(l->mountpoint, MNT_DETACH | UMOUNT_NOFOLLOW);
		l->mountpoint[0] = '\0';
	}
	if (l->device[0] != '\0') {
		if (loopxfs_detach(l->device, l->image, msg, sizeof(msg)) < 0)
			teardown_note(why, sizeof(why), "%s", msg);
		l->device[0] = '\0';
	}
	if (l->image[0] != '\0') {
		if (unlink(l->image) < 0 && errno != ENOENT)
			teardown_note(why, sizeof(why), "unlink %s: %s", l->image, strerror(errno));
		l->image[0] = '\0';
	}
	if (l->dir[0] != '\0') {
		char mnt[PATH_MAX + 8];

		(void)snprintf(mnt, sizeof(mnt), "%s/mnt", l->dir);
		(void)rmdir(mnt);
		r = rmdir(l->dir);
		if (r < 0 && errno != ENOENT)
			teardown_note(why, sizeof(why), "rmdir %s: %s", l->dir, strerror(errno));
		l->dir[0] = '\0';
	}
	if (why[0])
		teardown_fail("loop XFS %s: %s", l->label, why);
}
