/* SPDX-License-Identifier: MIT */
/*
 * The changes between two snapshots applied to a copy of the older one in
 * one process (src/stream/tree-apply.c, evacuate's passes), on two real
 * loop-backed XFS filesystems, as an evacuation has them: the source tree and
 * its two block-sharing snapshots on one, the copy on the other. After files
 * are rewritten in part, made, deleted, renamed, linked and retyped, the copy
 * equals the newer snapshot by the independent comparator, and only the
 * rewritten ranges travelled; a full apply (no base) into an empty directory
 * equals it too; and an apply that fails on the receiving side (the copy is
 * not the base's) returns its error at once instead of waiting on the walk's
 * thread, with a walk too big for the pipe. Needs root and xfsprogs.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "clone/clone.h"
#include "helpers/loopxfs.h"
#include "helpers/testbed.h"
#include "helpers/treecmp.h"
#include "helpers/treefill.h"
#include "stream/tree-apply.h"
#include "util/macro.h"

static LoopXfs a, b;
static char why[2048];

static void setup(void)
{
	int r;

	if (geteuid() != 0)
		cr_skip_test("needs root for loop devices");
	if (access("/usr/sbin/mkfs.xfs", X_OK) != 0 && access("/sbin/mkfs.xfs", X_OK) != 0)
		cr_skip_test("needs mkfs.xfs (package xfsprogs)");
	r = loopxfs_create(&a, NULL, 400);
	cr_assert_eq(r, 0, "loopxfs_create: %s", strerror(-r));
	r = loopxfs_create(&b, NULL, 400);
	cr_assert_eq(r, 0, "loopxfs_create: %s", strerror(-r));
}

static void teardown(void)
{
	loopxfs_destroy(&a);
	loopxfs_destroy(&b);
}

TestSuite(tree_apply, .init = setup, .fini = teardown, .timeout = 300);

static char *at(const LoopXfs *l, const char *rel)
{
	static char bufs[8][PATH_MAX + 64];
	static int i;
	char *p = bufs[i++ % 8];

	snprintf(p, PATH_MAX + 64, "%s/%s", l->mountpoint, rel);
	return p;
}

static int open_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	cr_assert_geq(fd, 0, "%s: %m", path);
	return fd;
}

/* A block-sharing snapshot of @from at @to (the clone engine; nothing writes @from meanwhile). */
static void snapshot(const char *from, const char *to)
{
	_cleanup_free_ char *err = NULL;
	CloneParams p = { .freeze_fd = -EBADF };
	int r;

	cr_assert_eq(mkdir(to, 0700), 0);
	p.src_fd = open_dir(from);
	p.dst_fd = open_dir(to);
	r = clone_tree(&p, NULL, &err);
	cr_assert_eq(r, 0, "clone %s: %s", from, err ? err : strerror(-r));
	close(p.src_fd);
	close(p.dst_fd);
}

static void write_at(const char *path, char c, off_t off, size_t len, int flags)
{
	static char buf[1 << 20];
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644);

	cr_assert_geq(fd, 0, "%s: %m", path);
	memset(buf, c, sizeof(buf));
	for (size_t done = 0; done < len;) {
		size_t n = len - done < sizeof(buf) ? len - done : sizeof(buf);

		cr_assert_eq(pwrite(fd, buf, n, off + (off_t)done), (ssize_t)n);
		done += n;
	}
	close(fd);
}

/* Applies @old -> @new (both on a) to @dst (on b); returns the result, *st filled. */
static int apply(const char *new, const char *old, const char *dst, TreeApplyStats *st, char **err)
{
	RecvLimits lim = { .max_bytes = UINT64_MAX, .max_records = UINT64_MAX, .allow_devices = true };
	int nfd = open_dir(new), ofd = old ? open_dir(old) : -EBADF, dfd = open_dir(dst), r;

	r = tree_apply_changes(nfd, ofd, dfd, &lim, st, err);
	close(nfd);
	if (ofd >= 0)
		close(ofd);
	close(dfd);
	return r;
}

Test(tree_apply, the_copy_of_the_old_snapshot_becomes_the_new_one_with_only_the_changed_ranges)
{
	_cleanup_free_ char *err = NULL;
	TreeApplyStats st = { 0 };
	int r;

	cr_assert_eq(mkdir(at(&a, "vol"), 0755), 0);
	tree_fill_sample(at(&a, "vol"));
	write_at(at(&a, "vol/big"), 'x', 0, 32u << 20, 0);
	write_at(at(&a, "vol/moved"), 'm', 0, 1u << 20, 0);
	cr_assert_eq(mkdir(at(&a, "vol/gone"), 0755), 0);
	write_at(at(&a, "vol/gone/f"), 'g', 0, 4096, 0);
	snapshot(at(&a, "vol"), at(&a, "s1"));

	/* The copy of s1 on the other filesystem: the full apply, into an empty directory. */
	cr_assert_eq(mkdir(at(&b, "copy"), 0700), 0);
	r = apply(at(&a, "s1"), NULL, at(&b, "copy"), &st, &err);
	cr_assert_eq(r, 0, "full apply: %s", err ? err : strerror(-r));
	cr_assert_eq(treecmp(at(&a, "s1"), at(&b, "copy"), 0, why, sizeof(why)), 0, "after the full apply: %s", why);
	cr_assert_geq(st.data_bytes, 33u << 20, "a full apply wrote %llu bytes", (unsigned long long)st.data_bytes);

	/* Changes: 1 MiB rewritten in 32, a rename into a subdirectory, a directory gone, a retype, a new link. */
	write_at(at(&a, "vol/big"), 'y', 8u << 20, 1u << 20, 0);
	cr_assert_eq(mkdir(at(&a, "vol/newdir"), 0750), 0);
	cr_assert_eq(rename(at(&a, "vol/moved"), at(&a, "vol/newdir/moved")), 0);
	cr_assert_eq(unlink(at(&a, "vol/gone/f")), 0);
	cr_assert_eq(rmdir(at(&a, "vol/gone")), 0);
	cr_assert_eq(unlink(at(&a, "vol/sym")), 0);
	cr_assert_eq(mkdir(at(&a, "vol/sym"), 0700), 0);
	cr_assert_eq(link(at(&a, "vol/big"), at(&a, "vol/newdir/big.link")), 0);
	cr_assert_eq(setxattr(at(&a, "vol/top.txt"), "user.k", "w", 1, 0), 0);
	snapshot(at(&a, "vol"), at(&a, "s2"));

	r = apply(at(&a, "s2"), at(&a, "s1"), at(&b, "copy"), &st, &err);
	cr_assert_eq(r, 0, "incremental apply: %s", err ? err : strerror(-r));
	cr_assert_eq(treecmp(at(&a, "s2"), at(&b, "copy"), 0, why, sizeof(why)), 0, "after the increment: %s", why);
	/* The rewritten MiB (the renamed file comes from its old name, the new link is a link). */
	cr_log_info("incremental apply: %llu records, %llu data bytes", (unsigned long long)st.records,
		    (unsigned long long)st.data_bytes);
	cr_assert_leq(st.data_bytes, 2u << 20, "the increment carried %llu bytes",
		      (unsigned long long)st.data_bytes);
}

Test(tree_apply, only_the_rewritten_blocks_travel)
{
	_cleanup_free_ char *err = NULL;
	TreeApplyStats st = { 0 };
	int r;

	cr_assert_eq(mkdir(at(&a, "vol"), 0755), 0);
	write_at(at(&a, "vol/big"), 'x', 0, 64u << 20, 0);
	snapshot(at(&a, "vol"), at(&a, "s1"));
	cr_assert_eq(mkdir(at(&b, "copy"), 0700), 0);
	cr_assert_eq(apply(at(&a, "s1"), NULL, at(&b, "copy"), &st, &err), 0, "%s", err ? err : "?");
	write_at(at(&a, "vol/big"), 'y', 16u << 20, 256u << 10, 0);
	snapshot(at(&a, "vol"), at(&a, "s2"));
	r = apply(at(&a, "s2"), at(&a, "s1"), at(&b, "copy"), &st, &err);
	cr_assert_eq(r, 0, "%s", err ? err : strerror(-r));
	cr_assert_eq(treecmp(at(&a, "s2"), at(&b, "copy"), 0, why, sizeof(why)), 0, "%s", why);
	cr_assert_geq(st.data_bytes, 256u << 10);
	cr_assert_leq(st.data_bytes, 1u << 20, "256 KiB rewritten in 64 MiB carried %llu bytes",
		      (unsigned long long)st.data_bytes);
}

Test(tree_apply, a_failure_on_the_receiving_side_ends_the_walk_and_is_returned)
{
	_cleanup_free_ char *err = NULL;
	TreeApplyStats st = { 0 };
	char name[64];
	int r;

	/* More records than a pipe holds, so that the walk would block if nobody stopped it. */
	cr_assert_eq(mkdir(at(&a, "vol"), 0755), 0);
	for (int i = 0; i < 3000; i++) {
		snprintf(name, sizeof(name), "vol/f%04d", i);
		write_at(at(&a, name), 'a', 0, 4096, 0);
	}
	snapshot(at(&a, "vol"), at(&a, "s1"));
	for (int i = 0; i < 3000; i++) {
		snprintf(name, sizeof(name), "vol/f%04d", i);
		write_at(at(&a, name), 'b', 0, 4096, 0);
	}
	snapshot(at(&a, "vol"), at(&a, "s2"));
	/* Not a copy of s1: the first change to a file that is not there fails. */
	cr_assert_eq(mkdir(at(&b, "empty"), 0700), 0);
	r = apply(at(&a, "s2"), at(&a, "s1"), at(&b, "empty"), &st, &err);
	cr_assert_lt(r, 0, "an apply into a directory that is not the base's copy succeeded");
	cr_assert_not_null(err);
	cr_log_info("refused as it should: %s", err);
	cr_assert(strstr(err, "f0000"), "the error does not name the file: %s", err);
}

/*
 * A file of the old snapshot holding the same bytes and times as the new one's
 * but in other blocks (as a snapshot's file is when the clone's frozen pass
 * carried a change into it, or a copy): its ranges travel, and its times must
 * be set again after they are written, though they did not change.
 */
Test(tree_apply, a_file_written_with_unchanged_times_gets_its_times_back)
{
	_cleanup_free_ char *err = NULL;
	TreeApplyStats st = { 0 };
	int r;

	cr_assert_eq(mkdir(at(&a, "vol"), 0755), 0);
	write_at(at(&a, "vol/f"), 'x', 0, 1u << 20, 0);
	cr_assert_eq(mkdir(at(&a, "s1"), 0755), 0);
	/* s1: vol's file copied (not reflinked): other blocks, the same bytes and times. */
	cr_assert_eq(RUN("cp", "-a", "--reflink=never", at(&a, "vol/f"), at(&a, "s1/f")), 0);
	cr_assert_eq(RUN("touch", "-r", at(&a, "vol"), at(&a, "s1")), 0);
	snapshot(at(&a, "vol"), at(&a, "s2"));
	cr_assert_eq(treecmp(at(&a, "s1"), at(&a, "s2"), TREECMP_SKIP_ROOT_META, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(mkdir(at(&b, "copy"), 0700), 0);
	cr_assert_eq(apply(at(&a, "s1"), NULL, at(&b, "copy"), &st, &err), 0, "%s", err ? err : "?");
	sleep(1); /* a write now would give the file another time */
	r = apply(at(&a, "s2"), at(&a, "s1"), at(&b, "copy"), &st, &err);
	cr_assert_eq(r, 0, "%s", err ? err : strerror(-r));
	cr_assert_eq(treecmp(at(&a, "s2"), at(&b, "copy"), 0, why, sizeof(why)), 0, "%s", why);
}
