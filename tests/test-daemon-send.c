/* SPDX-License-Identifier: MIT */
/*
 * `nvmevol volume send` and `volume receive` through the real daemon on
 * loop-backed XFS: a full and an incremental round trip compared with the
 * independent comparator (treecmp), the incremental stream's size after a
 * small change to a large file, the receiver's snapshot carrying the
 * sender's ID, a receive killed midway leaving the previous state, one killed
 * around its commit being its state with its snapshot or nothing, and the
 * hostile streams (traversal names, a symlink then a write through it, a hard
 * link out, a rename over a directory, cut short, a bit flipped, another
 * base, giant sizes, a device node, bytes after the end): each a clear Err,
 * nothing changed, nothing outside.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <linux/fs.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "stream/send-stream.h"
#include "helpers/testbed.h"
#include "helpers/treecmp.h"
#include "util/macro.h"

#define BIG_MIB 64

/* The freeze is not what these tests measure: a loaded machine's flush may take seconds. */
#define ENV ((const char *const[]){ "NVMEVOL_SELFTEST=off", "NVMEVOL_CLONE_FREEZE_BUDGET_MS=20000", NULL })

static Testbed tb;
static ClientReply rep;
static char out[65536], err[8192];

static void setup(void)
{
	testbed_require_root();
	testbed_setup(&tb, 1, ENV);
}

static void teardown(void)
{
	client_reply_done(&rep);
	testbed_destroy(&tb);
}

TestSuite(daemon_send, .init = setup, .fini = teardown, .timeout = 300);

#define ADMIN(...) testbed_admin(&tb, (const char *const[]){ __VA_ARGS__, NULL }, out, sizeof(out), err, sizeof(err))

static const char *bin(void)
{
	return getenv("NVMEVOL_BINARY") ? getenv("NVMEVOL_BINARY") : "build/src/nvmevol";
}

/* `nvmevol ARGS < IN > OUT` with the testbed's socket: the exit status; stderr in err, stdout in out. */
static int nv(const char *args, const char *in, const char *outfile)
{
	return testbed_shell(&tb, args, in, outfile, out, sizeof(out), err, sizeof(err));
}

static void create_volume(const char *name, const char *opts)
{
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"%s\",\"Opts\":{%s}}", name, opts), 0, "%s",
		     client_err(&rep));
}

static void path_of(const char *dir, const char *rel, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", dir, rel);
}

static void put(const char *dir, const char *rel, const char *data, size_t len)
{
	char p[1024];
	int fd;

	path_of(dir, rel, p, sizeof(p));
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	cr_assert_geq(fd, 0, "%s: %s", p, strerror(errno));
	cr_assert_eq(write(fd, data, len), (ssize_t)len);
	cr_assert_eq(fsync(fd), 0);
	close(fd);
}

static void snapdata(const char *volume, const char *snap, char *buf, size_t len)
{
	char mp[400];

	testbed_part_mountpoint(&tb, 0, mp, sizeof(mp));
	snprintf(buf, len, "%s/nvmevol/snapshots/%s/data/%s", mp, volume, snap);
}

static long long file_size(const char *p)
{
	struct stat st;

	cr_assert_eq(stat(p, &st), 0, "%s: %s", p, strerror(errno));
	return (long long)st.st_size;
}

/* Every inode type a volume holds, with owners, modes, ns times, attributes, a hard link, holes, a big file. */
static void make_tree(const char *v)
{
	static char block[1 << 20];
	char p[1024], q[1024];
	struct timespec ts[2] = { { 1500000000, 111 }, { 1600000000, 987654321 } };
	int fd;

	for (size_t i = 0; i < sizeof(block); i++)
		block[i] = (char)(i * 13 + i / 509);
	path_of(v, "d", p, sizeof(p));
	cr_assert_eq(mkdir(p, 0750), 0);
	path_of(v, "d/sub", p, sizeof(p));
	cr_assert_eq(mkdir(p, 0700), 0);
	put(v, "d/sub/deep", "deep\n", 5);
	put(v, "d/data", block, 100000);
	path_of(v, "d/data", p, sizeof(p));
	cr_assert_eq(chown(p, 1234, 5678), 0);
	cr_assert_eq(chmod(p, 04750), 0);
	cr_assert_eq(setxattr(p, "user.k", "v\0\x01\xff", 4, 0), 0);
	path_of(v, "d/data.link", q, sizeof(q));
	cr_assert_eq(link(p, q), 0);
	path_of(v, "sym", p, sizeof(p));
	cr_assert_eq(symlink("d/data", p), 0);
	path_of(v, "fifo", p, sizeof(p));
	cr_assert_eq(mkfifo(p, 0620), 0);
	path_of(v, "null", p, sizeof(p));
	cr_assert_eq(mknod(p, S_IFCHR | 0666, makedev(1, 3)), 0);
	path_of(v, "sparse", p, sizeof(p));
	fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, block, 4096, 1 << 20), 4096);
	cr_assert_eq(ftruncate(fd, 16 << 20), 0);
	close(fd);
	path_of(v, "big", p, sizeof(p));
	fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	for (int i = 0; i < BIG_MIB; i++)
		cr_assert_eq(write(fd, block, sizeof(block)), (ssize_t)sizeof(block));
	cr_assert_eq(fsync(fd), 0);
	close(fd);
	put(v, "gone-later", "x", 1);
	/* Renamed later: a file, and a directory with a file. */
	put(v, "moved", block, sizeof(block));
	path_of(v, "dir-moved", p, sizeof(p));
	cr_assert_eq(mkdir(p, 0755), 0);
	put(v, "dir-moved/inside", block, sizeof(block));
	path_of(v, "dir-gone-later", p, sizeof(p));
	cr_assert_eq(mkdir(p, 0755), 0);
	put(v, "dir-gone-later/f", "y", 1);
	path_of(v, "d/data", p, sizeof(p));
	cr_assert_eq(utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW), 0);
	path_of(v, "sym", p, sizeof(p));
	cr_assert_eq(utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW), 0);
}

/* A small change: 4 KiB of the big file, names made and deleted, a type change, metadata, a new hard link. */
static void change_tree(const char *v)
{
	char p[1024], q[1024];
	int fd;

	path_of(v, "big", p, sizeof(p));
	fd = open(p, O_WRONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, "CHANGED!", 8, 10 << 20), 8);
	cr_assert_eq(fsync(fd), 0);
	close(fd);
	path_of(v, "gone-later", p, sizeof(p));
	cr_assert_eq(unlink(p), 0);
	path_of(v, "dir-gone-later/f", p, sizeof(p));
	cr_assert_eq(unlink(p), 0);
	path_of(v, "dir-gone-later", p, sizeof(p));
	cr_assert_eq(rmdir(p), 0);
	put(v, "dir-gone-later", "now a file\n", 11);
	put(v, "new", "new file\n", 9);
	path_of(v, "d/sub/deep", p, sizeof(p));
	path_of(v, "d/sub/deep-renamed", q, sizeof(q));
	cr_assert_eq(rename(p, q), 0);
	path_of(v, "moved", p, sizeof(p));
	path_of(v, "d/sub/moved-here", q, sizeof(q));
	cr_assert_eq(rename(p, q), 0);
	fd = open(q, O_WRONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, "renamed and changed", 19, 4096), 19);
	close(fd);
	path_of(v, "dir-moved", p, sizeof(p));
	path_of(v, "dir-renamed", q, sizeof(q));
	cr_assert_eq(rename(p, q), 0);
	path_of(v, "d/data", p, sizeof(p));
	path_of(v, "d/data.link2", q, sizeof(q));
	cr_assert_eq(link(p, q), 0);
	path_of(v, "sym", p, sizeof(p));
	cr_assert_eq(unlink(p), 0);
	cr_assert_eq(symlink("elsewhere", p), 0);
	path_of(v, "fifo", p, sizeof(p));
	cr_assert_eq(chmod(p, 0600), 0);
	path_of(v, "sparse", p, sizeof(p));
	cr_assert_eq(truncate(p, 4 << 20), 0);
	cr_assert_eq(setxattr(p, "user.new", "1", 1, 0), 0);
}

static void snapshot(const char *vol, const char *snap)
{
	cr_assert_eq(ADMIN("volume", "snapshot", vol, snap), 0, "%s", err);
}

/* The ID of snapshot @snap of @vol, from `volume snapshots --json`. */
static void snapshot_id(const char *vol, const char *snap, char *buf, size_t len)
{
	json_t *j, *arr, *s;
	size_t i;

	buf[0] = '\0';
	cr_assert_eq(ADMIN("volume", "snapshots", vol, "--json"), 0, "%s", err);
	j = json_loads(out, 0, NULL);
	cr_assert_not_null(j, "%s", out);
	arr = json_object_get(j, "snapshots");
	json_array_foreach(arr, i, s)
		if (strcmp(json_string_value(json_object_get(s, "name")), snap) == 0 && json_object_get(s, "id"))
			snprintf(buf, len, "%s", json_string_value(json_object_get(s, "id")));
	json_decref(j);
}

static void send_to(const char *file, const char *vol, const char *snap, const char *from)
{
	char args[600];

	snprintf(args, sizeof(args), "volume send %s --snapshot %s%s%s", vol, snap, from ? " --from " : "",
		 from ? from : "");
	cr_assert_eq(nv(args, NULL, file), 0, "%s", err);
}

static int receive_from(const char *file, const char *vol, const char *opts)
{
	char args[600];

	snprintf(args, sizeof(args), "volume receive %s %s", vol, opts ? opts : "");
	return nv(args, file, NULL);
}

static void compare(const char *a, const char *b, const char *what)
{
	char why[1024];

	cr_assert_eq(treecmp(a, b, TREECMP_SKIP_XFS_ACL_ALIAS, why, sizeof(why)), 0, "%s: %s", what, why);
}

/* A source with snapshots s1, s2 (s2 after change_tree), and the streams full-s1 and incr-s1-s2. */
static void prepare(char *full, char *incr, size_t len)
{
	char vol[512];

	create_volume("src", "\"dev\":\"true\"");
	testbed_volume_dir(&tb, 0, "src", vol, sizeof(vol));
	make_tree(vol);
	snapshot("src", "s1");
	change_tree(vol);
	snapshot("src", "s2");
	snprintf(full, len, "%s/full.stream", tb.dir);
	snprintf(incr, len, "%s/incr.stream", tb.dir);
	send_to(full, "src", "s1", NULL);
	send_to(incr, "src", "s2", "s1");
}

Test(daemon_send, a_full_and_an_incremental_stream_give_the_snapshots_trees_and_ids)
{
	char full[600], incr[600], s[700], dst[512], id_src[64], id_dst[64];
	long long fsz, isz;

	prepare(full, incr, sizeof(full));
	cr_assert_eq(receive_from(full, "dst", NULL), 0, "%s", err);
	cr_assert(strstr(out, "volume dst created from snapshot s1"), "%s", out);
	testbed_volume_dir(&tb, 0, "dst", dst, sizeof(dst));
	snapdata("src", "s1", s, sizeof(s));
	compare(s, dst, "full receive");
	/* The sender's options came along (dev=true), and so did its snapshot's ID. */
	cr_assert_eq(ADMIN("volume", "show", "dst", "--json"), 0, "%s", err);
	cr_assert(strstr(out, "\"dev\": \"true\""), "%s", out);
	snapshot_id("src", "s1", id_src, sizeof(id_src));
	snapshot_id("dst", "s1", id_dst, sizeof(id_dst));
	cr_assert(id_src[0] && strcmp(id_src, id_dst) == 0, "ids %s %s", id_src, id_dst);

	/* The incremental: only the changed blocks travel (of the 64 MiB file, of the renamed 1 MiB files). */
	fsz = file_size(full);
	isz = file_size(incr);
	cr_assert_gt(fsz, (long long)BIG_MIB << 20, "the full stream is %lld bytes", fsz);
	cr_assert_lt(isz, 256 * 1024, "the incremental stream is %lld bytes (full: %lld)", isz, fsz);
	cr_assert_eq(receive_from(incr, "dst", NULL), 0, "%s", err);
	cr_assert(strstr(out, "volume dst updated to snapshot s2"), "%s", out);
	snapdata("src", "s2", s, sizeof(s));
	compare(s, dst, "incremental receive");
	snapshot_id("src", "s2", id_src, sizeof(id_src));
	snapshot_id("dst", "s2", id_dst, sizeof(id_dst));
	cr_assert(id_src[0] && strcmp(id_src, id_dst) == 0, "ids %s %s", id_src, id_dst);
	/* The receiver's s1 is still the old state. */
	snapdata("src", "s1", s, sizeof(s));
	snapdata("dst", "s1", dst, sizeof(dst));
	compare(s, dst, "the receiver's base snapshot");

	/* The same incremental again: its snapshot is there already; nothing changes. */
	cr_assert_eq(receive_from(incr, "dst", NULL), 1);
	cr_assert(strstr(err, "already has"), "%s", err);
	/* --json */
	cr_assert_eq(nv("volume send src --snapshot s2 --from s1 --json", NULL, "/dev/null"), 0, "%s", err);
	cr_assert(strstr(err, "\"data_bytes\""), "%s", err);
	/* Usage errors exit 2, failures 1, --help 0. */
	cr_assert_eq(nv("volume send src", NULL, "/dev/null"), 2);
	cr_assert(strstr(err, "--snapshot S2 is required"), "%s", err);
	cr_assert_eq(nv("volume send src --snapshot ../x", NULL, "/dev/null"), 2);
	cr_assert_eq(nv("volume send src --snapshot nosuch", NULL, "/dev/null"), 1);
	cr_assert(strstr(err, "has no snapshot nosuch"), "%s", err);
	cr_assert_eq(nv("volume receive dst -o size=1G", incr, NULL), 2);
	cr_assert(strstr(err, "-o applies to the new volume of a full stream"), "%s", err);
	cr_assert_eq(nv("volume send --help", NULL, NULL), 0);
	cr_assert(strstr(out, "Usage: nvmevol volume send"), "%s", out);
	cr_assert_eq(nv("volume receive --help", NULL, NULL), 0);
}

Test(daemon_send, a_receive_is_refused_while_in_use_and_a_killed_one_leaves_the_previous_state)
{
	char full[600], incr[600], s[700], dst[512], fifo[600], props[2048];
	pid_t pid;
	int fd, in;
	static char buf[1 << 16];
	ssize_t n;
	long long sent = 0;

	prepare(full, incr, sizeof(full));
	cr_assert_eq(receive_from(full, "dst", NULL), 0, "%s", err);
	testbed_volume_dir(&tb, 0, "dst", dst, sizeof(dst));
	snapdata("src", "s1", s, sizeof(s));

	/* Mounted: refused, nothing changed. */
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"dst\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(receive_from(incr, "dst", NULL), 1);
	cr_assert(strstr(err, "while it is in use"), "%s", err);
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"dst\",\"ID\":\"c1\"}"), 0, "%s", client_err(&rep));
	compare(s, dst, "after a refused receive");

	/* Killed midway (SIGKILL, no cleanup of its own): the volume keeps its state. */
	snprintf(fifo, sizeof(fifo), "%s/feed", tb.dir);
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		char sock[400];

		snprintf(sock, sizeof(sock), "%s/nvmevol-admin.sock", tb.dir);
		in = open(fifo, O_RDONLY);
		dup2(in, 0);
		execl(bin(), bin(), "volume", "receive", "dst", "--socket", sock, (char *)NULL);
		_exit(127);
	}
	fd = open(fifo, O_WRONLY);
	in = open(incr, O_RDONLY);
	cr_assert(fd >= 0 && in >= 0);
	n = read(in, buf, 1000);
	cr_assert_eq(write(fd, buf, (size_t)n), n);
	sent += n;
	usleep(500 * 1000);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(fd);
	close(in);
	compare(s, dst, "after a killed receive");
	/* A restart deletes what it left (its copy and its bind); then the stream goes in. */
	cr_assert_eq(testbed_stop(&tb, SIGTERM), 0);
	testbed_start_or_fail(&tb, ENV);
	snapdata("dst", "", props, sizeof(props));
	strcat(props, "/..");
	cr_assert_eq(RUN("sh", "-c", "! ls \"$0\" | grep -q receive-", props), 0, "a receive copy stayed");
	cr_assert_eq(receive_from(incr, "dst", NULL), 0, "%s", err);
	snapdata("src", "s2", s, sizeof(s));
	compare(s, dst, "after the restart");
}

/* ---- a kill around a receive's commit ---- */

/* Starts the daemon with NVMEVOL_TEST_RECEIVE_KILL=@point, receives @stream into dst (the daemon kills itself there), restarts it. */
static void receive_killed_at(const char *point, const char *stream)
{
	char hook[64];
	const char *const env[] = { "NVMEVOL_SELFTEST=off", "NVMEVOL_CLONE_FREEZE_BUDGET_MS=20000", hook, NULL };
	int st;

	snprintf(hook, sizeof(hook), "NVMEVOL_TEST_RECEIVE_KILL=%s", point);
	testbed_stop(&tb, SIGTERM);
	testbed_start_or_fail(&tb, env);
	cr_assert_neq(receive_from(stream, "dst", NULL), 0, "the receive went through the kill at %s: %s", point, out);
	st = testbed_stop(&tb, 0);
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the daemon was not killed at %s (status %#x)", point, st);
	testbed_start_or_fail(&tb, ENV);
}

/* Whether nvmevol/snapshots/dst/data/@snap or meta/@snap.json is on the partition. */
static bool snapshot_on_disk(const char *snap)
{
	char p[800], mp[400];
	struct stat st;

	snapdata("dst", snap, p, sizeof(p));
	if (lstat(p, &st) == 0)
		return true;
	testbed_part_mountpoint(&tb, 0, mp, sizeof(mp));
	snprintf(p, sizeof(p), "%s/nvmevol/snapshots/dst/meta/%s.json", mp, snap);
	return lstat(p, &st) == 0;
}

/* Snapshot @snap of dst has the ID of src's, the sender's. */
static void assert_senders_id(const char *snap, const char *what)
{
	char id_src[64], id_dst[64];

	snapshot_id("src", snap, id_src, sizeof(id_src));
	snapshot_id("dst", snap, id_dst, sizeof(id_dst));
	cr_assert(id_src[0] && strcmp(id_src, id_dst) == 0, "%s: snapshot %s of dst has ID '%s', the sender's is %s",
		  what, snap, id_dst, id_src);
}

/*
 * A receive is atomic across a kill: the snapshot is taken of the received tree before the commit,
 * its record marked with that tree's root inode, and the mark cleared after it. Killed after the
 * marked record but before the commit (a full stream: before the volume's record; an incremental one:
 * before the RENAME_EXCHANGE), the restart finds the volume as before and no snapshot, on disk either;
 * killed after the commit but before the mark's clear, it finds the new state with its snapshot, the
 * sender's ID. (Before: the snapshot came after the commit, and a kill between left the new state
 * without it, so the next incremental stream was refused.)
 */
Test(daemon_send, a_receive_killed_around_its_commit_is_its_state_with_its_snapshot_or_nothing)
{
	char full[600], incr[600], s[700], dst[512], id_dst[64];

	if (!NVMEVOL_TEST_HOOKS)
		cr_skip_test("needs a build with -Dtest_hooks=true (NVMEVOL_TEST_RECEIVE_KILL)");
	prepare(full, incr, sizeof(full));

	receive_killed_at("before-commit", full);
	cr_assert_neq(tb_call(&tb, "Get", &rep, "{\"Name\":\"dst\"}"), 0, "a full receive killed before its commit left dst");
	cr_assert_not(snapshot_on_disk("s1"), "a full receive killed before its commit left its snapshot s1");

	receive_killed_at("before-clear", full);
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"dst\"}"), 0, "a full receive killed after its commit: %s",
		     client_err(&rep));
	testbed_volume_dir(&tb, 0, "dst", dst, sizeof(dst));
	snapdata("src", "s1", s, sizeof(s));
	compare(s, dst, "a full receive killed after its commit");
	assert_senders_id("s1", "a full receive killed after its commit");

	receive_killed_at("before-exchange", incr);
	compare(s, dst, "an incremental receive killed before its exchange");
	snapshot_id("dst", "s2", id_dst, sizeof(id_dst));
	cr_assert_eq(id_dst[0], '\0', "an incremental receive killed before its exchange listed s2 (%s)", id_dst);
	cr_assert_not(snapshot_on_disk("s2"), "an incremental receive killed before its exchange left snapshot s2");

	receive_killed_at("before-clear", incr);
	snapdata("src", "s2", s, sizeof(s));
	compare(s, dst, "an incremental receive killed after its exchange");
	assert_senders_id("s2", "an incremental receive killed after its exchange");
	snapdata("dst", "s2", dst, sizeof(dst));
	compare(s, dst, "the snapshot s2 of an incremental receive killed after its exchange");
	/* Nothing of the receives stayed in the way: the same stream again finds its snapshot there. */
	cr_assert_eq(receive_from(incr, "dst", NULL), 1);
	cr_assert(strstr(err, "already has"), "%s", err);
}

/* ---- a kill inside the receive's snapshot ---- */

static bool log_says(const char *what)
{
	char *log = testbed_log_text(&tb);
	bool found = log && strstr(log, what);

	free(log);
	return found;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * The trash worker deletes beside the freeze of a receive's snapshot (once,
 * the previous state of the volume, handed to it before the snapshot; now a
 * removed volume's: the previous state goes after the snapshot). Killed there without a guardian (PID 1 of a
 * plugin), the daemon must exit. It did not when the worker's unlink waited
 * inside the kernel on the frozen partition (D state: the kill cannot end
 * it), so nothing could restart the daemon and thaw the partition, and the
 * next receive hung (crashpoints recvincr/ioctl#6 and #7, RESULTS §9b).
 * The trash is held busy (paused after a decoy's deletion) until the freeze
 * is in place, with a second decoy queued, and the freeze is held long: no race to win.
 */
Test(daemon_send, a_kill_inside_the_receives_snapshot_while_the_trash_deletes_lets_the_daemon_exit)
{
	const char *const hold_env[] = { "NVMEVOL_SELFTEST=off", "NVMEVOL_TEST_FREEZE_NO_GUARDIAN=1",
					 "NVMEVOL_TEST_FREEZE_HOLD_MS=30000", "NVMEVOL_CLONE_FREEZE_BUDGET_MS=60000",
					 "NVMEVOL_TEST_CLONE_WRITEBACK_WAIT_MS=0", "NVMEVOL_TEST_TRASH_PAUSE_MS=6000", NULL };
	char full[600], incr[600], s[700], dst[512], trash[600], mp[512], sock[400], waits[512] = "";
	double t_decoy, t_frozen = 0;
	bool exited = false, frozen = false;
	int st = 0, fd;
	pid_t pid;

	if (!NVMEVOL_TEST_HOOKS)
		cr_skip_test("needs a build with -Dtest_hooks=true (NVMEVOL_TEST_FREEZE_HOLD_MS, NVMEVOL_TEST_TRASH_PAUSE_MS)");
	prepare(full, incr, sizeof(full));
	cr_assert_eq(receive_from(full, "dst", NULL), 0, "%s", err);
	testbed_volume_dir(&tb, 0, "dst", dst, sizeof(dst));
	snprintf(trash, sizeof(trash), "%s/../../trash", dst);
	testbed_part_mountpoint(&tb, 0, mp, sizeof(mp));
	testbed_stop(&tb, SIGTERM);
	testbed_start_or_fail(&tb, hold_env);

	/* The worker deletes the decoy, then pauses 6 s: the second decoy waits in the trash until then. */
	create_volume("decoy", "");
	create_volume("decoy2", "");
	cr_assert_eq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"decoy\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"decoy2\"}"), 0, "%s", client_err(&rep));
	t_decoy = now_s();
	snprintf(sock, sizeof(sock), "%s/nvmevol-admin.sock", tb.dir);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int in = open(incr, O_RDONLY);

		dup2(in, 0);
		dup2(open("/dev/null", O_WRONLY), 1);
		dup2(1, 2);
		execl(bin(), bin(), "volume", "receive", "dst", "--socket", sock, (char *)NULL);
		_exit(127);
	}
	while (now_s() - t_decoy < 60 && !frozen) {
		frozen = log_says("test hook: frozen");
		t_frozen = now_s();
		if (!frozen)
			usleep(20 * 1000);
	}
	cr_assert(frozen, "the receive's snapshot never froze the partition");
	cr_assert_lt(t_frozen - t_decoy, 5.0, "the freeze came %.1f s after the decoy, past the trash's pause: the "
		     "worker was not held off until it", t_frozen - t_decoy);
	/* The worker is back at work (7 s after the decoy), on the frozen partition. */
	while (now_s() - t_decoy < 7.5)
		usleep(50 * 1000);
	cr_assert(testbed_dir_holds(trash, "decoy2."), "the second decoy left the trash before the kill");

	kill(tb.pid, SIGKILL);
	for (int i = 0; i < 500 && !exited; i++) {
		exited = waitpid(tb.pid, &st, WNOHANG) == tb.pid;
		if (!exited)
			usleep(10 * 1000);
	}
	if (!exited) {
		/* Main's daemon: a thread waits on the frozen partition (percpu_rwsem_wait). Thaw it, or nothing ends. */
		char tasks[64], path[400], w[64];
		struct dirent *de;
		DIR *d;

		snprintf(tasks, sizeof(tasks), "/proc/%d/task", (int)tb.pid);
		d = opendir(tasks);
		while (d && (de = readdir(d)))
			if (de->d_name[0] != '.') {
				FILE *f;

				snprintf(path, sizeof(path), "%s/%s/wchan", tasks, de->d_name);
				f = fopen(path, "re");
				if (f && fgets(w, sizeof(w), f) && strlen(waits) + strlen(w) + 2 < sizeof(waits)) {
					strcat(waits, " ");
					strcat(waits, w);
				}
				if (f)
					fclose(f);
			}
		if (d)
			closedir(d);
		fd = open(mp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0) {
			(void)ioctl(fd, FITHAW, 0);
			close(fd);
		}
		waitpid(tb.pid, &st, 0);
	}
	tb.pid = -1;
	waitpid(pid, NULL, 0);
	cr_assert(exited, "the daemon killed inside the receive's freeze did not exit within 5 s: a thread of it "
		  "waited on the frozen partition, so no restart could thaw it (its threads waited in:%s)", waits);
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the daemon ended with status %#x", st);

	/* The restart thaws, the trash finishes, and the next receive ends with the stream's state. */
	testbed_start_or_fail(&tb, ENV);
	cr_assert(log_says("was frozen by nvmevol"), "the start-up thaw is not in the log");
	cr_assert_eq(receive_from(incr, "dst", NULL), 0, "%s", err);
	snapdata("src", "s2", s, sizeof(s));
	compare(s, dst, "the receive after the restart");
	for (int i = 0; i < 100 && testbed_dir_holds(trash, "receive-"); i++)
		usleep(100 * 1000);
	cr_assert_not(testbed_dir_holds(trash, "receive-"), "the trash never deleted the previous states");
}

/*
 * A receive is its state and its snapshot (the base of the next stream), or nothing: when the snapshot
 * cannot be taken after the commit (here a leftover where it goes: a file at nvmevol/snapshots/dst for
 * the full stream, a directory data/s2 without a record for the incremental one), the volume a full
 * stream made is removed again and an incremental one's previous state is put back, with an Err that
 * says nothing was changed. (Before: the volume stayed, created or updated, without its snapshot.)
 */
Test(daemon_send, a_receive_whose_snapshot_cannot_be_taken_changes_nothing)
{
	char full[600], incr[600], s[700], dst[512], mp[400], p[800];
	int fd;

	prepare(full, incr, sizeof(full));
	testbed_part_mountpoint(&tb, 0, mp, sizeof(mp));
	snprintf(p, sizeof(p), "%s/nvmevol/snapshots/dst", mp);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0, "%s: %s", p, strerror(errno));
	close(fd);
	cr_assert_eq(receive_from(full, "dst", NULL), 1, "%s", err);
	cr_assert(strstr(err, "nothing was changed"), "%s", err);
	cr_assert_neq(tb_call(&tb, "Get", &rep, "{\"Name\":\"dst\"}"), 0, "the full receive left volume dst");
	cr_assert_eq(unlink(p), 0);

	cr_assert_eq(receive_from(full, "dst", NULL), 0, "%s", err);
	snprintf(p, sizeof(p), "%s/nvmevol/snapshots/dst/data/s2", mp);
	cr_assert_eq(mkdir(p, 0700), 0, "%s: %s", p, strerror(errno));
	cr_assert_eq(receive_from(incr, "dst", NULL), 1, "%s", err);
	cr_assert(strstr(err, "nothing was changed"), "%s", err);
	testbed_volume_dir(&tb, 0, "dst", dst, sizeof(dst));
	snapdata("src", "s1", s, sizeof(s));
	compare(s, dst, "after an incremental receive whose snapshot failed");
	cr_assert_eq(rmdir(p), 0);
	/* Nothing else stayed in the way: the same stream goes in now. */
	cr_assert_eq(receive_from(incr, "dst", NULL), 0, "%s", err);
	snapdata("src", "s2", s, sizeof(s));
	compare(s, dst, "the incremental receive again");
}

/* ---- hostile streams ---- */

typedef struct Stream {
	SendWriter w;
	int fd;
	char path[600];
} Stream;

static void stream_open(Stream *s, const char *name, const char *base_id)
{
	char header[1024];

	snprintf(s->path, sizeof(s->path), "%s/%s", tb.dir, name);
	s->fd = open(s->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	cr_assert_geq(s->fd, 0);
	cr_assert_eq(send_writer_init(&s->w, s->fd, NULL), 0);
	snprintf(header, sizeof(header),
		 "{\"format\":\"nvmevol-send\",\"version\":1,\"volume\":\"x\",\"snapshot\":\"h2\",\"snapshot_id\":"
		 "\"%s\",\"base_id\":%s%s%s,\"options\":{}}",
		 "0123456789abcdef0123456789abcdef", base_id ? "\"" : "", base_id ? base_id : "null", base_id ? "\"" : "");
	cr_assert_eq(send_put_header(&s->w, header), 0);
}

static void stream_close(Stream *s, bool end)
{
	if (end)
		cr_assert_eq(send_put_end(&s->w), 0);
	send_writer_done(&s->w);
	close(s->fd);
}

Test(daemon_send, hostile_streams_get_a_clear_err_and_change_nothing)
{
	char full[600], incr[600], s1[700], dst[512], outside[600], base[64], p[800];
	struct stat st;
	Stream s;
	struct {
		char file[32];
		bool incremental;
		const char *err;
	} cases[20];
	size_t n = 0;
	static char block[4096];

	prepare(full, incr, sizeof(full));
	cr_assert_eq(receive_from(full, "dst", NULL), 0, "%s", err);
	testbed_volume_dir(&tb, 0, "dst", dst, sizeof(dst));
	snapdata("src", "s1", s1, sizeof(s1));
	snapshot_id("dst", "s1", base, sizeof(base));
	snprintf(outside, sizeof(outside), "%s/outside", tb.dir);

#define CASE(name, incr_, e)                                                                                    \
	do {                                                                                                       \
		snprintf(cases[n].file, sizeof(cases[n].file), "%s", name);                                        \
		cases[n].incremental = incr_;                                                                      \
		cases[n++].err = e;                                                                                \
		stream_open(&s, name, incr_ ? base : NULL);                                                        \
	} while (0)

	CASE("dotdot", true, "climbs out with '..'");
	cr_assert_eq(send_put_path(&s.w, SEND_MKDIR, "d/../../escape", 0755), 0);
	stream_close(&s, true);

	CASE("absolute", false, "is an absolute name");
	cr_assert_eq(send_put_path(&s.w, SEND_CREATE, outside, 0644), 0);
	stream_close(&s, true);

	CASE("symlink-write", true, "may not pass through symlinks");
	cr_assert_eq(send_put_two(&s.w, SEND_SYMLINK, "lnk", tb.dir), 0);
	cr_assert_eq(send_put_path(&s.w, SEND_CREATE, "lnk/outside", 0644), 0);
	stream_close(&s, true);

	CASE("symlink-leaf", true, "never through a symlink");
	cr_assert_eq(send_put_two(&s.w, SEND_SYMLINK, "lnk", outside), 0);
	cr_assert_eq(send_put_write(&s.w, "lnk", 0, "x", 1), 0);
	stream_close(&s, true);

	CASE("write-to-fifo", true, "is not a regular file");
	cr_assert_eq(send_put_write(&s.w, "fifo", 0, "x", 1), 0);
	stream_close(&s, true);

	CASE("hardlink-out", true, "climbs out with '..'");
	cr_assert_eq(send_put_two(&s.w, SEND_LINK, "h", "../../../../../../etc/passwd"), 0);
	stream_close(&s, true);

	CASE("rename-over-dir", true, "never replaces");
	cr_assert_eq(send_put_path(&s.w, SEND_MKDIR, "newdir", 0755), 0);
	cr_assert_eq(send_put_two(&s.w, SEND_RENAME, "big", "d"), 0);
	stream_close(&s, true);

	CASE("device", false, "-o dev=true");
	cr_assert_eq(send_put_mknod(&s.w, "kmem", S_IFCHR | 0600, makedev(1, 2)), 0);
	stream_close(&s, true);

	CASE("giant", true, "16 TiB");
	cr_assert_eq(send_put_range(&s.w, SEND_TRUNCATE, "big", 1ull << 60, 0), 0);
	stream_close(&s, true);

	CASE("no-end", true, "cut short");
	cr_assert_eq(send_put_write(&s.w, "big", 0, block, sizeof(block)), 0);
	stream_close(&s, false);

	CASE("trailing", true, "bytes follow");
	cr_assert_eq(send_put_write(&s.w, "big", 0, block, sizeof(block)), 0);
	stream_close(&s, true);
	{
		int fd = open(s.path, O_WRONLY | O_APPEND | O_CLOEXEC);
		cr_assert_eq(write(fd, "x", 1), 1);
		close(fd);
	}

	/* Another base: the header names an ID the receiver does not have. */
	snprintf(cases[n].file, sizeof(cases[n].file), "other-base");
	cases[n].incremental = true;
	cases[n++].err = "has no snapshot with ID";
	stream_open(&s, "other-base", "ffffffffffffffffffffffffffffffff");
	stream_close(&s, true);

	/* The real incremental, cut short and with a bit flipped. */
	snprintf(cases[n].file, sizeof(cases[n].file), "cut");
	cases[n].incremental = true;
	cases[n++].err = "cut short";
	snprintf(p, sizeof(p), "head -c %lld '%s' > '%s/cut'", file_size(incr) / 2, incr, tb.dir);
	cr_assert_eq(RUN("sh", "-c", p), 0);
	snprintf(cases[n].file, sizeof(cases[n].file), "flip");
	cases[n].incremental = true;
	cases[n++].err = "checksum";
	snprintf(p, sizeof(p), "cp '%s' '%s/flip' && printf '\\x55' | dd of='%s/flip' bs=1 seek=%lld conv=notrunc "
		 "status=none", incr, tb.dir, tb.dir, file_size(incr) / 2);
	cr_assert_eq(RUN("sh", "-c", p), 0);
	snprintf(cases[n].file, sizeof(cases[n].file), "garbage");
	cases[n].incremental = false;
	cases[n++].err = "not a stream of 'nvmevol volume send'";
	snprintf(p, sizeof(p), "head -c 4096 /dev/urandom > '%s/garbage'", tb.dir);
	cr_assert_eq(RUN("sh", "-c", p), 0);

	for (size_t i = 0; i < n; i++) {
		char file[700], mnt[400];

		snprintf(file, sizeof(file), "%s/%s", tb.dir, cases[i].file);
		cr_assert_eq(receive_from(file, cases[i].incremental ? "dst" : "evil", NULL), 1, "%s was received: %s",
			     cases[i].file, out);
		cr_assert(strstr(err, cases[i].err), "%s: %s", cases[i].file, err);
		cr_assert(strstr(err, "nothing was changed") || strstr(err, "has no snapshot with ID"), "%s: %s",
			  cases[i].file, err);
		cr_assert_neq(tb_call(&tb, "Get", &rep, "{\"Name\":\"evil\"}"), 0, "%s left a volume", cases[i].file);
		cr_assert_eq(lstat(outside, &st), -1, "%s wrote outside the volume", cases[i].file);
		compare(s1, dst, cases[i].file);
		testbed_part_mountpoint(&tb, 0, mnt, sizeof(mnt));
		snprintf(p, sizeof(p), "! ls -a '%s' '%s/nvmevol/snapshots/dst' '%s/nvmevol/imports' | grep -q "
			 "'receive\\|import-\\|^[0-9a-f]\\{16\\}$'", tb.prop, mnt, mnt);
		cr_assert_eq(RUN("sh", "-c", p), 0, "%s left its directory or bind", cases[i].file);
	}
	/* The control: the real stream goes in. */
	cr_assert_eq(receive_from(incr, "dst", NULL), 0, "%s", err);
}

/* ---- size= ---- */

static void setup_quota(void)
{
	testbed_require_root();
	testbed_setup_quota(&tb, ENV);
}

TestSuite(daemon_send_quota, .init = setup_quota, .fini = teardown, .timeout = 300);

/* Bytes charged to volume @name's project (Get's Status.quota.used_bytes). */
static long long used_bytes(const char *name)
{
	json_t *q;

	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"%s\"}", name), 0, "%s", client_err(&rep));
	q = json_object_get(json_object_get(json_object_get(rep.json, "Volume"), "Status"), "quota");
	cr_assert(json_is_integer(json_object_get(q, "used_bytes")), "no quota usage in Status: %s", rep.body);
	return json_integer_value(json_object_get(q, "used_bytes"));
}

/* @mib MiB of @fill written at @off_mib MiB of @dir/@rel (made if missing), in 1 MiB writes, fsynced. */
static void fill(const char *dir, const char *rel, int off_mib, int mib, char fill_byte)
{
	static char block[1 << 20];
	char p[600];
	int fd;

	memset(block, fill_byte, sizeof(block));
	path_of(dir, rel, p, sizeof(p));
	fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0, "%s: %s", p, strerror(errno));
	for (int i = 0; i < mib; i++)
		cr_assert_eq(pwrite(fd, block, sizeof(block), (off_t)(off_mib + i) << 20), (ssize_t)sizeof(block));
	cr_assert_eq(fsync(fd), 0);
	close(fd);
}

/*
 * Volume qs (a file f of @vol_mib MiB) with snapshot s1, received as qd with size=40M; then
 * @rewrite_mib MiB of f rewritten and @add_mib MiB added in a new file g, snapshot s2, and the
 * incremental stream s1 -> s2 in *incr. The receiver's usage before it is returned.
 */
static long long quota_pair(int vol_mib, int rewrite_mib, int add_mib, char *incr, size_t len)
{
	char vol[512], full[600];
	long long before;

	create_volume("qs", "");
	testbed_volume_dir(&tb, 0, "qs", vol, sizeof(vol));
	fill(vol, "f", 0, vol_mib, 0x11);
	snapshot("qs", "s1");
	snprintf(full, sizeof(full), "%s/q-full", tb.dir);
	snprintf(incr, len, "%s/q-incr", tb.dir);
	send_to(full, "qs", "s1", NULL);
	cr_assert_eq(receive_from(full, "qd", "-o size=40M"), 0, "%s", err);
	before = used_bytes("qd");
	if (rewrite_mib)
		fill(vol, "f", 0, rewrite_mib, 0x5a);
	if (add_mib)
		fill(vol, "g", 0, add_mib, 0x33);
	snapshot("qs", "s2");
	send_to(incr, "qs", "s2", "s1");
	return before;
}

/*
 * While the records go in, the receive's copy of the base snapshot is in project 0, as the
 * snapshot itself; at the commit it is charged to the volume (as root: XFS lets that pass the
 * hard limit) and the previous state leaves the project before the trash deletes it. So what
 * size= holds is the state the volume becomes, never both at once: measured in the qemu guest,
 * a copy charged from the start made 16 MiB of a 40M volume count 32 (then 40 while 16 were
 * rewritten), and a volume over half its size= could not receive a single changed block.
 */
Test(daemon_send_quota, an_incremental_receive_rewriting_a_volume_is_charged_what_it_becomes)
{
	char incr[600], s[700], dst[512];
	long long before, after;

	before = quota_pair(16, 16, 0, incr, sizeof(incr));
	cr_assert_eq(receive_from(incr, "qd", NULL), 0, "%s", err);
	testbed_volume_dir(&tb, 0, "qd", dst, sizeof(dst));
	snapdata("qs", "s2", s, sizeof(s));
	compare(s, dst, "after a receive that rewrote all of a volume with size=");
	after = used_bytes("qd");
	/* At the answer: the new state's 16 MiB, not the previous state's as well (it is in the trash). */
	cr_assert_leq(after, before + (1 << 20), "the volume is charged %lld bytes after the receive, %lld before",
		      after, before);
	cr_assert_eq(ADMIN("volume", "show", "qd", "--json"), 0, "%s", err);
	cr_assert(strstr(out, "\"size\": \"40M\""), "%s", out);
}

/* 24 MiB of size=40M: a copy charged while the records went in made it 48, and the first write failed (main). */
Test(daemon_send_quota, a_volume_over_half_its_size_receives_an_incremental_stream)
{
	char incr[600], s[700], dst[512];
	long long after;

	(void)quota_pair(24, 8, 8, incr, sizeof(incr));
	cr_assert_eq(receive_from(incr, "qd", NULL), 0, "%s", err);
	testbed_volume_dir(&tb, 0, "qd", dst, sizeof(dst));
	snapdata("qs", "s2", s, sizeof(s));
	compare(s, dst, "after a receive into a volume over half its size=");
	after = used_bytes("qd");
	cr_assert(after >= (32ll << 20) && after <= (33ll << 20), "the volume holds 32 MiB, charged %lld bytes", after);
}

/* 16 MiB + 32 MiB new > 40M: refused at the commit, naming size= and the resize; the volume as it was. */
Test(daemon_send_quota, a_received_state_larger_than_size_is_refused_and_changes_nothing)
{
	char incr[600], s[700], dst[512], p[800];
	long long before;

	before = quota_pair(16, 0, 32, incr, sizeof(incr));
	cr_assert_eq(receive_from(incr, "qd", NULL), 1, "a 48 MiB state went into size=40M: %s", err);
	cr_assert(strstr(err, "more than its size=40M") && strstr(err, "volume resize qd"), "%s", err);
	testbed_volume_dir(&tb, 0, "qd", dst, sizeof(dst));
	snapdata("qs", "s1", s, sizeof(s));
	compare(s, dst, "after a refused receive");
	cr_assert_leq(used_bytes("qd"), before + (1 << 20));
	testbed_part_mountpoint(&tb, 0, p, sizeof(p));
	strcat(p, "/nvmevol/snapshots/qd");
	cr_assert_eq(testbed_count_entries(p), 2, "only meta/ and data/ are left in %s", p);
}
