/* SPDX-License-Identifier: MIT */
/*
 * size= and inodes= through the real daemon: XFS project quotas enforced,
 * reported, shown by df, freed on Remove, kept and repaired across restarts.
 * Needs a kernel with XFS quota: it runs in the qemu guest (tests/qemu/), and
 * skips with that reason elsewhere.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "helpers/testbed.h"
#include "pool/quota.h"

static Testbed tb;
static ClientReply rep;

static void setup1(void)
{
	testbed_setup_quota(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=off", NULL });
}

static void teardown(void)
{
	client_reply_done(&rep);
	testbed_destroy(&tb);
}

TestSuite(quota_daemon, .init = setup1, .fini = teardown, .timeout = 240);

static json_t *quota_status(const char *name)
{
	cr_assert_eq(tb_call(&tb, "Get", &rep, "{\"Name\":\"%s\"}", name), 0, "%s", client_err(&rep));
	json_t *q = json_object_get(json_object_get(json_object_get(rep.json, "Volume"), "Status"), "quota");
	cr_assert_not_null(q, "no quota in Status: %s", rep.body);
	return q;
}

/* Waits until the partition's trash is empty (the background worker deleted what Remove put there). */
static void wait_trash_empty(void)
{
	char trash[600];
	bool empty = false;

	snprintf(trash, sizeof(trash), "%s/%s/nvmevol/trash", tb.parts_root, tb.parts[0].uuid);
	for (int i = 0; i < 100 && !empty; i++) {
		DIR *d = opendir(trash);
		struct dirent *de;

		cr_assert_not_null(d);
		empty = true;
		while ((de = readdir(d)))
			if (de->d_name[0] != '.')
				empty = false;
		closedir(d);
		if (!empty)
			usleep(100 * 1000);
	}
	cr_assert(empty, "the trash was not emptied");
}

static long long qint(json_t *q, const char *k)
{
	json_t *v = json_object_get(q, k);
	cr_assert(json_is_integer(v), "no %s in %s", k, rep.body);
	return json_integer_value(v);
}

static long long write_file(const char *path, long long bytes, int *ret_errno)
{
	return testbed_write_bytes(path, bytes, false, ret_errno);
}

static char mp[400], path[500];

Test(quota_daemon, size_limit_is_enforced_reported_and_shown_by_df)
{
	struct statvfs sv;
	int err;
	long long n;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"q1\",\"Opts\":{\"size\":\"8M\",\"inodes\":\"100\"}}"), 0, "%s", client_err(&rep));
	json_t *q = quota_status("q1");
	cr_expect_geq(qint(q, "project_id"), QUOTA_PROJID_MIN);
	cr_expect_eq(qint(q, "enforced_limit_bytes"), 8 << 20);
	cr_expect_eq(qint(q, "enforced_limit_inodes"), 100);

	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"q1\",\"ID\":\"a\"}"), 0, "%s", client_err(&rep));
	snprintf(mp, sizeof(mp), "%s/q1", tb.prop);
	/* df inside a container is statfs on the bind: the volume's limit is its size. */
	cr_assert_eq(statvfs(mp, &sv), 0);
	cr_expect_eq((long long)sv.f_blocks * sv.f_frsize, 8 << 20, "df shows %lld bytes", (long long)sv.f_blocks * sv.f_frsize);

	snprintf(path, sizeof(path), "%s/half", mp);
	n = write_file(path, 4 << 20, &err);
	cr_expect_eq(err, 0, "writing half the limit failed: %s", strerror(err));
	cr_expect_eq(n, 4 << 20);
	q = quota_status("q1");
	cr_expect_geq(qint(q, "used_bytes"), 4 << 20, "usage not accounted: %s", rep.body);
	cr_expect_geq(qint(q, "used_inodes"), 2);
	unlink(path);

	snprintf(path, sizeof(path), "%s/over", mp);
	n = write_file(path, 9 << 20, &err);
	cr_expect(err == ENOSPC || err == EDQUOT, "writing past the limit gave '%s'", strerror(err));
	cr_expect_leq(n, 8 << 20, "%lld bytes landed in an 8 MiB volume", n);
	q = quota_status("q1");
	cr_expect_leq(qint(q, "used_bytes"), 8 << 20);
}

Test(quota_daemon, ids_are_unique_kept_across_restarts_and_freed_on_remove)
{
	long long id1, id2;
	QuotaUsage u = { 0 };
	char partmp[400];
	int rootfd;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"qa\",\"Opts\":{\"size\":\"16M\"}}"), 0);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"qb\",\"Opts\":{\"size\":\"32M\"}}"), 0);
	id1 = qint(quota_status("qa"), "project_id");
	id2 = qint(quota_status("qb"), "project_id");
	cr_expect_neq(id1, id2);

	testbed_stop(&tb, SIGKILL);
	cr_assert_eq(testbed_start(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=off", NULL }), 0);
	cr_expect_eq(qint(quota_status("qa"), "project_id"), id1);
	cr_expect_eq(qint(quota_status("qb"), "enforced_limit_bytes"), 32 << 20);

	testbed_part_mountpoint(&tb, 0, partmp, sizeof(partmp));
	rootfd = open(partmp, O_RDONLY | O_DIRECTORY);
	cr_assert(rootfd >= 0);
	cr_assert_eq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"qa\"}"), 0);
	/* The directory is deleted in the background; its ID is free once nothing on disk carries it. */
	wait_trash_empty();
	/* The freed ID is reused, with the new volume's own limit. */
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"qc\",\"Opts\":{\"size\":\"8M\"}}"), 0);
	cr_expect_eq(qint(quota_status("qc"), "project_id"), id1);
	cr_expect_eq(qint(quota_status("qc"), "enforced_limit_bytes"), 8 << 20);
	close(rootfd);
	(void)u;
}

/*
 * Issue 10, bug 5: the trash worker used to clear a removed volume's limit
 * after deleting its directory; a volume created in between took the same
 * (lowest free) ID, and lost its limit. The pause hook holds the worker in
 * that window.
 */
Test(quota_daemon, a_new_volume_keeps_its_limit_while_the_trash_worker_finishes)
{
	long long id;

	testbed_stop(&tb, SIGTERM);
	cr_assert_eq(testbed_start(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=off", "NVMEVOL_TEST_TRASH_PAUSE_MS=2000", NULL }), 0);
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"old\",\"Opts\":{\"size\":\"16M\"}}"), 0);
	id = qint(quota_status("old"), "project_id");
	cr_assert_eq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"old\"}"), 0);
	wait_trash_empty(); /* deleted; the worker now pauses where it used to clear the limit */
	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"new\",\"Opts\":{\"size\":\"8M\"}}"), 0);
	cr_assert_eq(qint(quota_status("new"), "project_id"), id, "the test needs the ID to be reused");
	sleep(3); /* past the pause */
	cr_expect_eq(qint(quota_status("new"), "enforced_limit_bytes"), 8 << 20, "the new volume's limit was cleared");
}

/* Issue 10, bug 9: a size that is not a whole number of blocks is not "repaired" at every start. */
Test(quota_daemon, an_odd_size_is_not_repaired_at_every_start)
{
	char *log;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"odd\",\"Opts\":{\"size\":\"1048577\"}}"), 0, "%s", client_err(&rep));
	testbed_stop(&tb, SIGTERM);
	cr_assert_eq(testbed_start(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=off", NULL }), 0);
	cr_assert_geq(qint(quota_status("odd"), "enforced_limit_bytes"), 1048577);
	log = testbed_log_text(&tb);
	cr_assert_null(strstr(log, "repairing"), "a correct limit was repaired at start:\n%s", log);
	free(log);
}

Test(quota_daemon, start_repairs_a_missing_project_or_limit)
{
	char dir[700], partmp[400];
	long long id;
	int fd, rootfd;
	uint32_t got = 0;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"qr\",\"Opts\":{\"size\":\"12M\"}}"), 0);
	id = qint(quota_status("qr"), "project_id");
	testbed_stop(&tb, SIGTERM);

	testbed_part_mountpoint(&tb, 0, partmp, sizeof(partmp));
	testbed_volume_dir(&tb, 0, "qr", dir, sizeof(dir));
	rootfd = open(partmp, O_RDONLY | O_DIRECTORY);
	fd = open(dir, O_RDONLY | O_DIRECTORY);
	cr_assert(rootfd >= 0 && fd >= 0);
	cr_assert_eq(quota_set_limit(rootfd, (uint32_t)id, 0, 0), 0);
	cr_assert_eq(quota_set_project(fd, 0), 0);

	cr_assert_eq(testbed_start(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=off", NULL }), 0);
	cr_expect_eq(qint(quota_status("qr"), "enforced_limit_bytes"), 12 << 20, "limit not repaired: %s", rep.body);
	cr_assert_eq(quota_get_project(fd, &got, NULL), 0);
	cr_expect_eq(got, (uint32_t)id, "project ID not repaired");
	close(fd);
	close(rootfd);
}

/* "<partition>/nvmevol/@sub" opened, for planting what a test needs there. */
static int open_tree(const char *sub)
{
	char partmp[400], p[600];
	int fd;

	testbed_part_mountpoint(&tb, 0, partmp, sizeof(partmp));
	snprintf(p, sizeof(p), "%s/nvmevol/%s", partmp, sub);
	fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "open %s: %s", p, strerror(errno));
	return fd;
}

/*
 * Issue 19 item 3: IDs came from the registry, the shadows and the trash
 * only, so a directory in the quarantine kept its ID on disk while a new
 * volume got the same one: the orphan's data counted against the new
 * volume's limit, and a later limit on it bound both.
 */
Test(quota_daemon, an_id_carried_by_a_quarantined_directory_is_not_handed_out)
{
	int qfd = open_tree("quarantine"), fd, r;
	uint32_t got = 0;

	cr_assert_eq(mkdirat(qfd, "orphan.1700000000", 0700), 0);
	fd = openat(qfd, "orphan.1700000000", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	r = quota_set_project(fd, QUOTA_PROJID_MIN);
	cr_assert_eq(r, 0, "quota_set_project: %s", strerror(-r));
	close(openat(fd, "data", O_WRONLY | O_CREAT | O_CLOEXEC, 0600));

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"fresh\",\"Opts\":{\"size\":\"8M\"}}"), 0, "%s", client_err(&rep));
	cr_expect_neq(qint(quota_status("fresh"), "project_id"), QUOTA_PROJID_MIN,
		      "the new volume got the ID of a quarantined directory");
	cr_expect_eq(qint(quota_status("fresh"), "enforced_limit_bytes"), 8 << 20);
	cr_assert_eq(quota_get_project(fd, &got, NULL), 0);
	cr_expect_eq(got, QUOTA_PROJID_MIN, "the quarantined directory's ID changed");
	close(fd);
	close(qfd);
}

/* The same for a volume whose record cannot be read: its placeholder in the registry has no ID. */
Test(quota_daemon, an_id_of_a_volume_whose_record_is_unreadable_is_not_handed_out)
{
	QuotaUsage u = { 0 };
	long long id;
	int mfd, fd, rootfd;
	char partmp[400];

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"kept\",\"Opts\":{\"size\":\"16M\"}}"), 0, "%s", client_err(&rep));
	id = qint(quota_status("kept"), "project_id");
	testbed_stop(&tb, SIGTERM);
	mfd = open_tree("meta");
	fd = openat(mfd, "kept.json", O_WRONLY | O_TRUNC | O_CLOEXEC);
	cr_assert_geq(fd, 0, "open the record: %s", strerror(errno));
	cr_assert_eq(write(fd, "{not json", 9), 9);
	close(fd);
	close(mfd);
	cr_assert_eq(testbed_start(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=off", NULL }), 0);

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"fresh\",\"Opts\":{\"size\":\"8M\"}}"), 0, "%s", client_err(&rep));
	cr_expect_neq(qint(quota_status("fresh"), "project_id"), id,
		      "the new volume got the ID that the unreadable volume's directory carries");
	testbed_part_mountpoint(&tb, 0, partmp, sizeof(partmp));
	rootfd = open(partmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(rootfd, 0);
	cr_assert_eq(quota_get(rootfd, (uint32_t)id, &u), 0);
	cr_expect_eq(u.bytes_hard, 16 << 20, "the unreadable volume's limit was overwritten");
	close(rootfd);
}

/*
 * Issue 24 (limits under failure): a limit that a failed repair at start left
 * missing, or one lost while the daemon runs, is set again at the first Mount,
 * before a container gets the volume.
 */
Test(quota_daemon, the_first_mount_puts_a_missing_limit_back)
{
	char partmp[400];
	long long id;
	int rootfd, err;
	long long n;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"qm\",\"Opts\":{\"size\":\"4M\"}}"), 0, "%s", client_err(&rep));
	id = qint(quota_status("qm"), "project_id");
	testbed_part_mountpoint(&tb, 0, partmp, sizeof(partmp));
	rootfd = open(partmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(rootfd, 0);
	cr_assert_eq(quota_set_limit(rootfd, (uint32_t)id, 0, 0), 0);
	close(rootfd);

	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"qm\",\"ID\":\"m\"}"), 0, "%s", client_err(&rep));
	cr_expect_eq(qint(quota_status("qm"), "enforced_limit_bytes"), 4 << 20, "the limit is still missing: %s", rep.body);
	snprintf(mp, sizeof(mp), "%s/qm", tb.prop);
	snprintf(path, sizeof(path), "%s/over", mp);
	n = write_file(path, 5 << 20, &err);
	cr_expect(err == ENOSPC || err == EDQUOT, "a write past the limit gave '%s' after %lld bytes", strerror(err), n);
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"qm\",\"ID\":\"m\"}"), 0);
}

/*
 * A limited volume whose partition no longer enforces project quota
 * (enforcement turned off, a mount without prjquota) is not served
 * unlimited: the first Mount fails and says what to do; with enforcement
 * back it mounts again (the control).
 */
Test(quota_daemon, a_limit_that_is_not_enforced_refuses_the_mount)
{
	char partmp[400], cmd[600];

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"qe\",\"Opts\":{\"size\":\"4M\"}}"), 0, "%s", client_err(&rep));
	testbed_part_mountpoint(&tb, 0, partmp, sizeof(partmp));
	snprintf(cmd, sizeof(cmd), "xfs_quota -x -c 'disable -p' '%s'", partmp);
	cr_assert_eq(system(cmd), 0, "%s failed", cmd);
	testbed_stop(&tb, SIGTERM);
	cr_assert_eq(testbed_start(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=off", NULL }), 0);

	cr_assert_neq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"qe\",\"ID\":\"m\"}"), 0,
		      "a limited volume was mounted without its limit enforced");
	cr_expect(strstr(client_err(&rep), "not mounted without its limit") &&
			  strstr(client_err(&rep), "nvmevol volume resize qe none --inodes none"),
		  "%s", client_err(&rep));

	snprintf(cmd, sizeof(cmd), "xfs_quota -x -c 'enable -p' '%s'", partmp);
	cr_assert_eq(system(cmd), 0, "%s failed", cmd);
	testbed_stop(&tb, SIGTERM);
	cr_assert_eq(testbed_start(&tb, (const char *const[]){ "NVMEVOL_SELFTEST=off", NULL }), 0);
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"qe\",\"ID\":\"m\"}"), 0, "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"qe\",\"ID\":\"m\"}"), 0);
}
