/* SPDX-License-Identifier: MIT */
/*
 * projid: reads and changes XFS project IDs the way any process can that owns
 * a file (or holds CAP_FOWNER), e.g. inside a container, to test whether it
 * can move its files out of its volume's size limit. Built static so that it
 * runs in the busybox image of the e2e tests and in the qemu guest.
 *
 *   projid get PATH...           print each PATH's project ID and inherit flag
 *                                (FS_IOC_FSGETXATTR) and its flags (FS_IOC_GETFLAGS)
 *   projid set ID PATH...        FS_IOC_FSSETXATTR: project ID := ID; on a
 *                                directory the inherit flag is set (cleared for 0)
 *   projid set-high ID PATH...   the same, with bit 32 set in the ioctl command
 *                                (the kernel truncates the command to 32 bits;
 *                                a seccomp rule must too)
 *   projid set-syscall ID PATH...  the same through the file_setattr()
 *                                system call (Linux 6.17) instead of the ioctl
 *   projid noinherit PATH...     FS_IOC_SETFLAGS without FS_PROJINHERIT_FL
 *                                (what `chattr -P` does): new files in the
 *                                directory then get project 0
 *
 * One line per PATH: "PATH projid=N inherit=0|1 flags=0x...", "PATH: ok" or
 * "PATH: ERRNAME (text)". Exit status 0 if every PATH succeeded, 1 if any
 * failed, 2 on a usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int fail(const char *path, int err)
{
	printf("%s: %s (%s)\n", path, strerrorname_np(err) ?: "?", strerror(err));
	return 1;
}

/* After a failed call on @fd: report errno, close. */
static int fail_close(int fd, const char *path)
{
	int e = errno;

	close(fd);
	return fail(path, e);
}

static int get_one(const char *path)
{
	struct fsxattr fa = { 0 };
	int flags = 0;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

	if (fd < 0)
		return fail(path, errno);
	if (ioctl(fd, FS_IOC_FSGETXATTR, &fa) < 0 || ioctl(fd, FS_IOC_GETFLAGS, &flags) < 0)
		return fail_close(fd, path);
	close(fd);
	printf("%s projid=%u inherit=%d flags=%#x\n", path, fa.fsx_projid, !!(fa.fsx_xflags & FS_XFLAG_PROJINHERIT),
	       (unsigned)flags);
	return 0;
}

/* high: pass the command with bit 32 set, through the raw syscall. */
static int set_one(const char *path, uint32_t id, int high)
{
	struct fsxattr fa = { 0 };
	struct stat st;
	unsigned long cmd = FS_IOC_FSSETXATTR;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

	if (fd < 0)
		return fail(path, errno);
	if (fstat(fd, &st) < 0 || ioctl(fd, FS_IOC_FSGETXATTR, &fa) < 0)
		return fail_close(fd, path);
	fa.fsx_projid = id;
	if (S_ISDIR(st.st_mode)) {
		if (id == 0)
			fa.fsx_xflags &= ~(uint32_t)FS_XFLAG_PROJINHERIT;
		else
			fa.fsx_xflags |= FS_XFLAG_PROJINHERIT;
	}
	if (high)
		cmd |= 1UL << 32;
	if (syscall(SYS_ioctl, fd, cmd, &fa) < 0)
		return fail_close(fd, path);
	close(fd);
	printf("%s: ok\n", path);
	return 0;
}

/* file_setattr(2), Linux 6.17: not in glibc 2.36 nor its headers. */
#define NR_FILE_GETATTR 468 /* x86_64 */
#define NR_FILE_SETATTR 469
struct file_attr_v0 {
	uint64_t fa_xflags;
	uint32_t fa_extsize;
	uint32_t fa_nextents;
	uint32_t fa_projid;
	uint32_t fa_cowextsize;
};

static int set_syscall_one(const char *path, uint32_t id)
{
	struct file_attr_v0 fa = { 0 };
	struct stat st;

	if (lstat(path, &st) < 0)
		return fail(path, errno);
	if (syscall(NR_FILE_GETATTR, AT_FDCWD, path, &fa, sizeof(fa), AT_SYMLINK_NOFOLLOW) < 0)
		return fail(path, errno);
	fa.fa_projid = id;
	if (S_ISDIR(st.st_mode)) {
		if (id == 0)
			fa.fa_xflags &= ~(uint64_t)FS_XFLAG_PROJINHERIT;
		else
			fa.fa_xflags |= FS_XFLAG_PROJINHERIT;
	}
	fa.fa_nextents = 0; /* read-only field: the kernel refuses it set */
	if (syscall(NR_FILE_SETATTR, AT_FDCWD, path, &fa, sizeof(fa), AT_SYMLINK_NOFOLLOW) < 0)
		return fail(path, errno);
	printf("%s: ok\n", path);
	return 0;
}

static int noinherit_one(const char *path)
{
	int flags = 0;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

	if (fd < 0)
		return fail(path, errno);
	if (ioctl(fd, FS_IOC_GETFLAGS, &flags) < 0)
		return fail_close(fd, path);
	flags &= ~FS_PROJINHERIT_FL;
	if (ioctl(fd, FS_IOC_SETFLAGS, &flags) < 0)
		return fail_close(fd, path);
	close(fd);
	printf("%s: ok\n", path);
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: projid get PATH...\n"
			"       projid set ID PATH...\n"
			"       projid set-high ID PATH...\n"
			"       projid set-syscall ID PATH...\n"
			"       projid noinherit PATH...\n");
	return 2;
}

int main(int argc, char **argv)
{
	int first = 2, bad = 0;
	unsigned long id = 0;

	if (argc < 3)
		return usage();
	if (strncmp(argv[1], "set", 3) == 0 &&
	    (argv[1][3] == 0 || strcmp(argv[1], "set-high") == 0 || strcmp(argv[1], "set-syscall") == 0)) {
		char *end;
		errno = 0;
		id = strtoul(argv[2], &end, 10);
		if (errno || *end || end == argv[2] || id > UINT32_MAX || argc < 4)
			return usage();
		first = 3;
	} else if (strcmp(argv[1], "get") != 0 && strcmp(argv[1], "noinherit") != 0)
		return usage();

	for (int i = first; i < argc; i++) {
		if (strcmp(argv[1], "get") == 0)
			bad |= get_one(argv[i]);
		else if (strcmp(argv[1], "noinherit") == 0)
			bad |= noinherit_one(argv[i]);
		else if (strcmp(argv[1], "set-syscall") == 0)
			bad |= set_syscall_one(argv[i], (uint32_t)id);
		else
			bad |= set_one(argv[i], (uint32_t)id, strcmp(argv[1], "set-high") == 0);
	}
	fflush(stdout);
	return bad;
}
