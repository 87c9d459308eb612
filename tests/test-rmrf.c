/* SPDX-License-Identifier: MIT */
/*
 * rm_rf_at()/rm_rf_children() on a real loop-backed XFS: any depth, a bounded
 * number of fds, never through a symlink, never across a mount (also a bind
 * mount of the same filesystem), and a stop when a directory is moved out of
 * the tree under the walk. Needs root (loop device, mounts, mode-0000
 * directories, fanotify permission events); skips without it.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers/loopxfs.h"
#include "util/fs-util.h"

static LoopXfs lx;
static int root_fd = -1;
static char mounted[4][PATH_MAX + 64]; /* mounts a test made inside the tree, undone by teardown */
static int n_mounted;

static void setup(void)
{
	int r;

	if (geteuid() != 0)
		cr_skip_test("needs root for loop devices and mounts");
	if (access("/usr/sbin/mkfs.xfs", X_OK) != 0 && access("/sbin/mkfs.xfs", X_OK) != 0)
		cr_skip_test("needs mkfs.xfs (package xfsprogs)");
	r = loopxfs_create(&lx, NULL, 300);
	cr_assert_eq(r, 0, "loopxfs_create: %s", strerror(-r));
	root_fd = open(lx.mountpoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(root_fd, 0);
}

static void teardown(void)
{
	while (n_mounted > 0)
		(void)umount2(mounted[--n_mounted], MNT_DETACH);
	if (root_fd >= 0)
		(void)close(root_fd);
	root_fd = -1;
	loopxfs_destroy(&lx);
}

TestSuite(rmrf, .init = setup, .fini = teardown, .timeout = 300);

static void mount_or_die(const char *src, const char *target, const char *fstype, unsigned long flags)
{
	cr_assert_lt(n_mounted, 4);
	cr_assert_eq(mount(src, target, fstype, flags, NULL), 0, "mount %s on %s: %s", src, target, strerror(errno));
	snprintf(mounted[n_mounted++], sizeof(mounted[0]), "%s", target);
}

static void touch_at(int dfd, const char *name, const char *content)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

	cr_assert_geq(fd, 0, "create %s: %s", name, strerror(errno));
	if (content)
		cr_assert_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
	close(fd);
}

/* mkdir @name in @dfd and open it. */
static int mkdir_open(int dfd, const char *name)
{
	int fd;

	cr_assert_eq(mkdirat(dfd, name, 0755), 0, "mkdir %s: %s", name, strerror(errno));
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "open %s: %s", name, strerror(errno));
	return fd;
}

/*
 * <root>/@top/d/d/.../d, @depth directories below @top, with a file "f" in
 * every @files_every-th level and a sibling directory "s" (holding a file) in
 * every @side_every-th level; built with one fd at a time, as deep as asked.
 */
static void make_chain(const char *top, int depth, int files_every, int side_every)
{
	int fd = mkdir_open(root_fd, top);

	for (int level = 1; level <= depth; level++) {
		int next = mkdir_open(fd, "d");

		close(fd);
		fd = next;
		if (files_every && level % files_every == 0)
			touch_at(fd, "f", "x");
		if (side_every && level % side_every == 0) {
			cr_assert_eq(mkdirat(fd, "s", 0700), 0);
			touch_at(fd, "s/g", "y");
		}
	}
	close(fd);
}

/* "@top/d/d/..." down to @level (0 = @top itself), relative to the filesystem root. */
static void chain_path(const char *top, int level, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "%s", top);

	for (int i = 0; i < level && n + 3 < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "/d");
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	cr_assert_not_null(d);
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the DIR's own fd */
}

static bool exists_at(int dfd, const char *path)
{
	struct stat st;

	return fstatat(dfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

Test(rmrf, never_follows_symlinks)
{
	char path[PATH_MAX + 64];
	int vfd;

	cr_assert_eq(mkdirat(root_fd, "canary", 0755), 0);
	touch_at(root_fd, "canary/keep", "keep");
	cr_assert_eq(mkdirat(root_fd, "vol", 0755), 0);
	vfd = openat(root_fd, "vol", O_RDONLY | O_DIRECTORY);
	snprintf(path, sizeof(path), "%s/canary", lx.mountpoint);
	cr_assert_eq(symlinkat(path, vfd, "l1"), 0);
	cr_assert_eq(symlinkat("/", vfd, "l2"), 0);
	cr_assert_eq(mkdirat(vfd, "d", 0000), 0);
	cr_assert_eq(symlinkat("../../canary", vfd, "d/l3"), 0); /* root: the 0000 directory does not stop us */
	cr_assert_eq(mkfifoat(vfd, "fifo", 0600), 0);
	cr_assert_eq(linkat(root_fd, "canary/keep", vfd, "hard", 0), 0);
	close(vfd);
	cr_assert_eq(rm_rf_at(root_fd, "vol"), 0);
	cr_expect_not(exists_at(root_fd, "vol"));
	cr_expect(exists_at(root_fd, "canary/keep"), "deleted through a link");
}

/* The old recursion stopped at 4096 levels with -ELOOP and leaked the tree. */
Test(rmrf, removes_a_tree_deeper_than_4096_levels)
{
	make_chain("deep", 5000, 97, 1000);
	cr_assert_eq(rm_rf_at(root_fd, "deep"), 0);
	cr_expect_not(exists_at(root_fd, "deep"));
}

/* Two fds per level ran out of a 64-fd limit at ~30 levels; the walk must stay within a fixed number. */
Test(rmrf, fds_stay_bounded_with_rlimit_nofile_64)
{
	struct rlimit rl = { .rlim_cur = 64, .rlim_max = 64 };
	int before;

	make_chain("tree", 600, 10, 50);
	before = count_fds();
	cr_assert_lt(before, 64 - 20, "the test process already holds %d fds", before);
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0, "setrlimit: %s", strerror(errno));
	cr_assert_eq(rm_rf_at(root_fd, "tree"), 0);
	cr_expect_not(exists_at(root_fd, "tree"));
	cr_expect_eq(count_fds(), before, "fds leaked");
}

/*
 * A tmpfs near the top and a bind mount of a directory of the same XFS deep
 * down (below the levels whose streams stay open) are left alone with
 * everything in them, the rest goes, and the walk ends.
 */
Test(rmrf, never_crosses_a_mount_even_a_bind_of_the_same_filesystem)
{
	char p[PATH_MAX + 600], rel[600];

	mkdirat(root_fd, "outside", 0755);
	touch_at(root_fd, "outside/precious", "precious");
	make_chain("tree", 60, 1, 7);

	chain_path("tree", 40, rel, sizeof(rel));
	snprintf(p, sizeof(p), "%s/%s/s", lx.mountpoint, rel);
	{
		char src[PATH_MAX + 64];
		snprintf(src, sizeof(src), "%s/outside", lx.mountpoint);
		/* level 40 has no "s" (side_every 7), so make the mountpoint */
		cr_assert_eq(mkdir(p, 0755), 0, "mkdir %s: %s", p, strerror(errno));
		mount_or_die(src, p, NULL, MS_BIND);
	}
	chain_path("tree", 3, rel, sizeof(rel));
	snprintf(p, sizeof(p), "%s/%s/t", lx.mountpoint, rel);
	cr_assert_eq(mkdir(p, 0755), 0);
	mount_or_die("tmpfs", p, "tmpfs", 0);
	snprintf(p, sizeof(p), "%s/%s/t/onfs", lx.mountpoint, rel);
	close(open(p, O_WRONLY | O_CREAT, 0600));

	cr_expect_eq(rm_rf_at(root_fd, "tree"), -EXDEV);
	cr_expect(exists_at(root_fd, "outside/precious"), "deleted through a bind mount of the same filesystem");
	cr_expect(access(p, F_OK) == 0, "deleted inside a tmpfs mounted in the tree");
	/* Only the paths to the two mountpoints are left: no file, no side directory. */
	chain_path("tree", 7, rel, sizeof(rel));
	strcat(rel, "/s");
	cr_expect_not(exists_at(root_fd, rel), "a side directory was left");
	chain_path("tree", 35, rel, sizeof(rel));
	strcat(rel, "/s");
	cr_expect_not(exists_at(root_fd, rel), "a side directory was left");
	chain_path("tree", 41, rel, sizeof(rel));
	cr_expect_not(exists_at(root_fd, rel), "the part below the deep mount was left");
	chain_path("tree", 4, rel, sizeof(rel));
	cr_expect(exists_at(root_fd, rel), "the path to the deep mount was removed");
	chain_path("tree", 40, rel, sizeof(rel));
	strcat(rel, "/f");
	cr_expect_not(exists_at(root_fd, rel), "a file next to the mount was left");

	while (n_mounted > 0)
		cr_assert_eq(umount2(mounted[--n_mounted], 0), 0);
	cr_expect_eq(rm_rf_at(root_fd, "tree"), 0);
	cr_expect_not(exists_at(root_fd, "tree"));
	cr_expect(exists_at(root_fd, "outside/precious"));
}

/* Level @level's name in the named chains below: distinct at every level, of varying length. */
static void level_name(int level, char *buf, size_t len)
{
	snprintf(buf, len, "lvl%02d%.*s", level, level % 7, "-------");
}

/*
 * <root>/@top/lvl01/lvl02-/.../lvl@depth, a file in every level; with
 * @collide, each level L-1 of the first @depth-16 also holds a non-empty
 * directory named like level L+16: the name that overwrote level L's in a
 * 16-slot ring (the walk had 16 levels open below L when it entered L+16).
 */
static void make_named_chain(const char *top, int depth, bool collide)
{
	char name[32];
	int fd = mkdir_open(root_fd, top);

	for (int level = 1; level <= depth; level++) {
		int next;

		level_name(level, name, sizeof(name));
		next = mkdir_open(fd, name);
		/* After the chain's level: read after it, so still there when the walk pops back from the chain. */
		if (collide && level + 16 <= depth) {
			int sfd;

			level_name(level + 16, name, sizeof(name));
			sfd = mkdir_open(fd, name);
			touch_at(sfd, "inside", "s");
			close(sfd);
		}
		close(fd);
		fd = next;
		touch_at(fd, "f", "x");
	}
	close(fd);
}

/* "@top/lvl01/lvl02-/..." down to @level, relative to the filesystem root. */
static void named_path(const char *top, int level, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "%s", top);
	char name[32];

	for (int i = 1; i <= level && n + sizeof(name) < len; i++) {
		level_name(i, name, sizeof(name));
		n += (size_t)snprintf(buf + n, len - n, "/%s", name);
	}
}

/*
 * Issue 19 item 4: the names were kept in a 16-slot ring, so popping back to a
 * level more than 16 above the deepest one rmdir'ed the name of a deeper
 * level. The old chain test names every level "d", which hides it. With no
 * such name in the parent that rmdir only fails with ENOENT and the re-read
 * parent finds the directory again (so this one held even then); the next
 * test gives the wrong name something to hit.
 */
Test(rmrf, distinct_names_at_every_level_are_all_removed)
{
	make_named_chain("tree", 40, false);
	cr_expect_eq(rm_rf_at(root_fd, "tree"), 0);
	cr_expect_not(exists_at(root_fd, "tree"), "a tree with distinct names at 40 levels was left");
}

/*
 * Each sibling named like a deeper level is removed by its own walk, never
 * rmdir'ed in that level's place: the ring's wrong name hit the non-empty
 * sibling (ENOTEMPTY), the level stayed, and so did the tree (a Remove's
 * trash entry, retried at every start).
 */
Test(rmrf, a_non_empty_sibling_named_like_a_deeper_level)
{
	make_named_chain("tree", 40, true);
	cr_expect_eq(rm_rf_at(root_fd, "tree"), 0);
	cr_expect_not(exists_at(root_fd, "tree"), "the tree was left");
}

/*
 * The same, with the siblings made unremovable (an immutable file in each):
 * they survive with their content, and everything else goes, the whole chain
 * next to them included.
 */
Test(rmrf, an_unremovable_sibling_named_like_a_deeper_level_survives_alone)
{
	char rel[1024], name[32];
	int flags = FS_IMMUTABLE_FL, fd, r;

	make_named_chain("tree", 40, true);
	for (int level = 1; level + 16 <= 40; level++) {
		named_path("tree", level - 1, rel, sizeof(rel));
		level_name(level + 16, name, sizeof(name));
		snprintf(rel + strlen(rel), sizeof(rel) - strlen(rel), "/%s/inside", name);
		fd = openat(root_fd, rel, O_RDONLY | O_CLOEXEC);
		cr_assert_geq(fd, 0, "open %s: %s", rel, strerror(errno));
		cr_assert_eq(ioctl(fd, FS_IOC_SETFLAGS, &flags), 0, "chattr +i: %s", strerror(errno));
		close(fd);
	}
	r = rm_rf_at(root_fd, "tree");
	for (int level = 1; level + 16 <= 40; level++) {
		named_path("tree", level - 1, rel, sizeof(rel));
		level_name(level + 16, name, sizeof(name));
		snprintf(rel + strlen(rel), sizeof(rel) - strlen(rel), "/%s/inside", name);
		cr_expect(exists_at(root_fd, rel), "the sibling %s was removed", rel);
		/* Undo, so that the testbed can go. */
		fd = openat(root_fd, rel, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			int none = 0;
			(void)ioctl(fd, FS_IOC_SETFLAGS, &none);
			close(fd);
		}
	}
	cr_expect_eq(r, -EPERM, "rm_rf_at: %d", r);
	/* Levels 0..23 hold a sibling, so they stay as its path, and nothing else of them: level 24 goes. */
	named_path("tree", 24, rel, sizeof(rel));
	cr_expect_not(exists_at(root_fd, rel), "the chain below the last sibling was left");
	for (int level = 1; level <= 23; level++) {
		named_path("tree", level, rel, sizeof(rel));
		strcat(rel, "/f");
		cr_expect_not(exists_at(root_fd, rel), "%s was left", rel);
	}
	cr_expect_eq(rm_rf_at(root_fd, "tree"), 0);
	cr_expect_not(exists_at(root_fd, "tree"));
}

typedef struct Walk {
	int r;
} Walk;

static void *walk_thread(void *arg)
{
	Walk *w = arg;

	w->r = rm_rf_at(root_fd, "tree");
	return NULL;
}

/*
 * A directory above the open window is renamed out of the tree while the walk
 * is held (fanotify permission event) below it: climbing back up through ".."
 * would lead into the directory it was moved to, so the walk must stop there.
 */
Test(rmrf, directory_moved_out_of_the_tree_stops_the_walk)
{
	char rel[256], d10[256], p[PATH_MAX + 300];
	struct fanotify_event_metadata ev;
	struct fanotify_response resp;
	pthread_t t;
	Walk w = { 0 };
	int fan;

	mkdirat(root_fd, "outside", 0755);
	touch_at(root_fd, "outside/precious", "precious");
	make_chain("tree", 40, 1, 0);
	chain_path("tree", 10, d10, sizeof(d10));
	chain_path("tree", 30, rel, sizeof(rel));
	snprintf(p, sizeof(p), "%s/%s", lx.mountpoint, rel);

	fan = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC, O_RDONLY | O_CLOEXEC);
	if (fan < 0)
		cr_skip_test("fanotify permission events unavailable: %s", strerror(errno));
	cr_assert_eq(fanotify_mark(fan, FAN_MARK_ADD, FAN_OPEN_PERM | FAN_ONDIR, AT_FDCWD, p), 0,
		     "fanotify_mark: %s", strerror(errno));
	cr_assert_eq(pthread_create(&t, NULL, walk_thread, &w), 0);
	/* The walk is now blocked opening level 30: move level 10 (closed long ago) out of the tree. */
	cr_assert_eq(read(fan, &ev, sizeof(ev)), (ssize_t)sizeof(ev));
	cr_assert_eq(renameat(root_fd, d10, root_fd, "outside/moved"), 0, "rename: %s", strerror(errno));
	resp = (struct fanotify_response){ .fd = ev.fd, .response = FAN_ALLOW };
	cr_assert_eq(write(fan, &resp, sizeof(resp)), (ssize_t)sizeof(resp));
	close(ev.fd);
	pthread_join(t, NULL);
	close(fan);

	cr_expect_eq(w.r, -ESTALE, "rm_rf_at: %d", w.r);
	cr_expect(exists_at(root_fd, "outside/precious"), "the walk climbed into the directory it was moved to");
	cr_expect(exists_at(root_fd, "outside/moved"), "the walk went on past the moved directory");
}
