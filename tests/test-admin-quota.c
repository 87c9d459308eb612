/* SPDX-License-Identifier: MIT */
/*
 * `nvmevol volume resize` through the real daemon and the real command:
 * a shrink below the current usage is refused, a grow lets a write that hit
 * the old limit through, a volume created without limits gets a project ID
 * whose usage counts its existing files, "none" removes limits, and the
 * limits survive a restart. Needs XFS project quota: runs in the qemu guest
 * (tests/qemu/run-quota-tests.sh) and skips with that reason elsewhere.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers/loopxfs.h"
#include "helpers/testbed.h"
#include "pool/quota.h"

static Testbed tb;
static ClientReply rep;
static char out[64 * 1024], err[8192];
static const char *const selftest_off[] = { "NVMEVOL_SELFTEST=off", NULL };

static void setup1(void)
{
	testbed_setup_quota(&tb, selftest_off);
}

static void teardown(void)
{
	client_reply_done(&rep);
	testbed_destroy(&tb);
}

TestSuite(admin_quota, .init = setup1, .fini = teardown, .timeout = 300);

/* `nvmevol ARGS... --socket <this daemon's admin socket>`: the exit status; stdout in out[], stderr in err[]. */
static int nv(const char *const *args)
{
	return testbed_admin(&tb, args, out, sizeof(out), err, sizeof(err));
}
#define NV(...) nv((const char *const[]){ __VA_ARGS__, NULL })

static long long append(const char *path, long long bytes, int *ret_errno)
{
	return testbed_write_bytes(path, bytes, true, ret_errno);
}

/* The kernel's hard limits of the volume's project on partition @part, and the project ID. */
static uint32_t kernel_limits_on(const char *name, int part, QuotaUsage *u)
{
	char partmp[400];
	json_t *j;
	uint32_t id;
	int fd;

	cr_assert_eq(NV("volume", "show", name, "--json"), 0, "%s", err);
	j = json_loads(out, 0, NULL);
	cr_assert_not_null(j, "%s", out);
	id = (uint32_t)json_integer_value(json_object_get(json_object_get(j, "Admin"), "project_id"));
	json_decref(j);
	testbed_part_mountpoint(&tb, part, partmp, sizeof(partmp));
	fd = open(partmp, O_RDONLY | O_DIRECTORY);
	cr_assert_geq(fd, 0);
	*u = (QuotaUsage){ 0 };
	if (id)
		cr_assert_eq(quota_get(fd, id, u), 0);
	close(fd);
	return id;
}

static uint32_t kernel_limits(const char *name, QuotaUsage *u)
{
	return kernel_limits_on(name, 0, u);
}

Test(admin_quota, shrink_below_usage_is_refused_and_a_grow_lets_a_blocked_write_through)
{
	char mp[400], file[500];
	QuotaUsage u;
	long long n;
	int e;
	json_t *j;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"grow\",\"Opts\":{\"size\":\"10M\"}}"), 0, "%s", client_err(&rep));
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"grow\",\"ID\":\"c\"}"), 0, "%s", client_err(&rep));
	snprintf(mp, sizeof(mp), "%s/grow", tb.prop);
	snprintf(file, sizeof(file), "%s/data", mp);
	n = append(file, 6 << 20, &e);
	cr_assert_eq(e, 0, "%s", strerror(e));

	/* Below what it uses: refused, with the figures, and the limit stays. */
	cr_assert_eq(NV("volume", "resize", "grow", "4M"), 1);
	cr_assert(strstr(err, "more than size=4M") && strstr(err, "choose a size of at least"), "%s", err);
	kernel_limits("grow", &u);
	cr_assert_eq(u.bytes_hard, 10u << 20);

	/* Fill it: the write stops at the limit... */
	n = append(file, 8 << 20, &e);
	cr_assert(e == EDQUOT || e == ENOSPC, "no quota error: %s after %lld bytes", strerror(e), n);
	/* ...a grow, while mounted, and the same write goes through. */
	cr_assert_eq(NV("volume", "resize", "grow", "20M", "--json"), 0, "%s", err);
	j = json_loads(out, 0, NULL);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(j, "before"), "size_bytes")), 10 << 20, "%s", out);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(j, "after"), "size_bytes")), 20 << 20, "%s", out);
	cr_assert_geq(json_integer_value(json_object_get(json_object_get(j, "usage"), "bytes")), 9 << 20, "%s", out);
	json_decref(j);
	n = append(file, 5 << 20, &e);
	cr_assert_eq(e, 0, "the grow did not let the write through: %s after %lld bytes", strerror(e), n);
	kernel_limits("grow", &u);
	cr_assert_eq(u.bytes_hard, 20u << 20);

	/* Inodes: below the count refused, above it set. */
	cr_assert_eq(NV("volume", "resize", "grow", "--inodes", "1"), 1);
	cr_assert(strstr(err, "files and directories, more than inodes=1"), "%s", err);
	cr_assert_eq(NV("volume", "resize", "grow", "--inodes", "100"), 0, "%s", err);
	cr_assert(strstr(out, "size limit 20.0 MiB -> 20.0 MiB, inode limit none -> 100"), "%s", out);

	/* Kept by a restart (from the record, checked against the kernel at start). */
	testbed_stop(&tb, SIGKILL);
	cr_assert_eq(testbed_start(&tb, selftest_off), 0);
	kernel_limits("grow", &u);
	cr_assert_eq(u.bytes_hard, 20u << 20);
	cr_assert_eq(u.inodes_hard, 100);

	/* "none": no limits at all, in the record and in the kernel. */
	cr_assert_eq(NV("volume", "resize", "grow", "none", "--inodes", "none"), 0, "%s", err);
	kernel_limits("grow", &u);
	cr_assert_eq(u.bytes_hard, 0);
	cr_assert_eq(u.inodes_hard, 0);
	n = append(file, 12 << 20, &e);
	cr_assert_eq(e, 0, "still limited: %s after %lld bytes", strerror(e), n);
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"grow\",\"ID\":\"c\"}"), 0);
}

Test(admin_quota, a_volume_created_without_limits_gets_a_project_that_counts_its_files)
{
	char dir[600], file[700], sub[700], mp[400];
	QuotaUsage u;
	uint32_t id;
	long long n;
	int e;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"free\"}"), 0);
	cr_assert_eq(kernel_limits("free", &u), 0, "a volume without limits has no project yet");
	/* Files written before any limit: in the directory, a subdirectory, and things that are not files. */
	testbed_volume_dir(&tb, 0, "free", dir, sizeof(dir));
	snprintf(file, sizeof(file), "%s/a", dir);
	append(file, 3 << 20, &e);
	cr_assert_eq(e, 0);
	snprintf(sub, sizeof(sub), "%s/sub", dir);
	cr_assert_eq(mkdir(sub, 0755), 0);
	snprintf(file, sizeof(file), "%s/sub/b", dir);
	append(file, 3 << 20, &e);
	cr_assert_eq(e, 0);
	snprintf(file, sizeof(file), "%s/sub/fifo", dir);
	cr_assert_eq(mkfifo(file, 0600), 0);
	snprintf(file, sizeof(file), "%s/link", dir);
	cr_assert_eq(symlink("/etc/passwd", file), 0);

	/* 6 MiB are there: a 4M limit is refused, which shows they are counted. */
	cr_assert_eq(NV("volume", "resize", "free", "4M"), 1);
	cr_assert(strstr(err, "more than size=4M"), "usage not counted: %s", err);
	id = kernel_limits("free", &u);
	cr_assert_geq(id, QUOTA_PROJID_MIN, "no project ID kept in the record");
	cr_assert_geq(u.used_bytes, 6u << 20);
	cr_assert_eq(u.bytes_hard, 0);

	cr_assert_eq(NV("volume", "resize", "free", "8M"), 0, "%s", err);
	cr_assert(strstr(out, "files and directories were tagged"), "%s", out);
	cr_assert_eq(kernel_limits("free", &u), id);
	/* Limited now: everything below inherits the project, no walk any more. */
	cr_assert_eq(NV("volume", "resize", "free", "8M", "--json"), 0, "%s", err);
	cr_assert(strstr(out, "\"tagged\": 0"), "walked again: %s", out);
	cr_assert_eq(u.bytes_hard, 8u << 20);
	/* New files anywhere below inherit the project: the limit holds. */
	cr_assert_eq(tb_call(&tb, "Mount", &rep, "{\"Name\":\"free\",\"ID\":\"c\"}"), 0);
	snprintf(mp, sizeof(mp), "%s/free/sub/c", tb.prop);
	n = append(mp, 4 << 20, &e);
	cr_assert(e == EDQUOT || e == ENOSPC, "no quota error: %s after %lld bytes", strerror(e), n);
	cr_assert_leq(n, 2 << 20, "%lld bytes landed past the limit", n);
	cr_assert_eq(tb_call(&tb, "Unmount", &rep, "{\"Name\":\"free\",\"ID\":\"c\"}"), 0);
}

static bool dir_empty(const char *p)
{
	DIR *d = opendir(p);
	struct dirent *de;
	bool empty = true;

	cr_assert_not_null(d, "%s: %s", p, strerror(errno));
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			empty = false;
	closedir(d);
	return empty;
}

/*
 * Issue 24 (limits under failure): a removed volume's limit stays on its free
 * project ID; a volume created without limits took that ID at its first
 * resize, and when the resize was then refused (below the usage) the old
 * limit bound the still unlimited volume.
 */
Test(admin_quota, a_refused_first_resize_leaves_the_volume_unlimited)
{
	char dir[600], file[700];
	QuotaUsage u;
	uint32_t old_id, id;
	long long n;
	int e;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"gone\",\"Opts\":{\"size\":\"4M\"}}"), 0, "%s", client_err(&rep));
	old_id = kernel_limits("gone", &u);
	cr_assert_eq(u.bytes_hard, 4u << 20);
	cr_assert_eq(tb_call(&tb, "Remove", &rep, "{\"Name\":\"gone\"}"), 0);
	/* Until the trash worker has deleted the directory, it carries the ID: wait for it to be free. */
	snprintf(dir, sizeof(dir), "%s/%s/nvmevol/trash", tb.parts_root, tb.parts[0].uuid);
	for (int i = 0; i < 100 && !dir_empty(dir); i++)
		usleep(100 * 1000);
	cr_assert(dir_empty(dir), "the trash was not emptied");

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"plain\"}"), 0);
	testbed_volume_dir(&tb, 0, "plain", dir, sizeof(dir));
	snprintf(file, sizeof(file), "%s/a", dir);
	append(file, 3 << 20, &e);
	cr_assert_eq(e, 0);
	cr_assert_eq(NV("volume", "resize", "plain", "1M"), 1, "a resize below the usage went through: %s", out);
	id = kernel_limits("plain", &u);
	cr_assert_eq(id, old_id, "the test needs the removed volume's ID to be reused");
	cr_assert_eq(u.bytes_hard, 0, "the unlimited volume is bound by the removed volume's limit");
	n = append(file, 4 << 20, &e);
	cr_assert_eq(e, 0, "a write into the unlimited volume stopped after %lld bytes: %s", n, strerror(e));
}

/* ---- evacuate (issue 20): the limits go along, under a project ID of the new partition ---- */

static void setup2(void)
{
	json_t *j, *p;
	size_t i;
	bool quota = true;

	testbed_setup(&tb, 2, selftest_off);
	cr_assert_eq(NV("status", "--json"), 0, "%s", err);
	j = json_loads(out, 0, NULL);
	json_array_foreach(json_object_get(j, "partitions"), i, p)
		quota = quota && json_is_true(json_object_get(p, "project_quota"));
	json_decref(j);
	if (!quota) {
		testbed_destroy(&tb);
		cr_skip_test("kernel without XFS project quota (CONFIG_XFS_QUOTA); runs in the qemu guest via tests/qemu/run-quota-tests.sh");
	}
}

Test(admin_quota, evacuate_keeps_the_limits_under_a_project_of_the_new_partition, .init = setup2)
{
	char path[700];
	QuotaUsage before, after;
	long long n;
	int e = 0;

	cr_assert_eq(tb_call(&tb, "Create", &rep, "{\"Name\":\"lim\",\"Opts\":{\"partition\":\"%s\",\"size\":\"64M\","
			     "\"inodes\":\"500\"}}", tb.parts[0].uuid), 0, "%s", client_err(&rep));
	testbed_volume_dir(&tb, 0, "lim", path, sizeof(path));
	strcat(path, "/f");
	cr_assert_eq(append(path, 10 << 20, &e), 10 << 20, "%s", strerror(e));
	cr_assert_neq(kernel_limits_on("lim", 0, &before), 0);
	cr_assert_eq(before.bytes_hard, 64 << 20);

	cr_assert_eq(NV("partition", "evacuate", tb.parts[0].uuid), 0, "%s %s", out, err);
	cr_assert_neq(kernel_limits_on("lim", 1, &after), 0, "no project ID on the new partition");
	cr_assert_eq(after.bytes_hard, before.bytes_hard, "size limit not kept");
	cr_assert_eq(after.inodes_hard, before.inodes_hard, "inodes limit not kept");
	cr_assert_geq(after.used_bytes, 10 << 20, "the copy's bytes are not charged to its project");
	/* And enforced there: the volume fills up to its limit, no further. */
	testbed_volume_dir(&tb, 1, "lim", path, sizeof(path));
	strcat(path, "/g");
	n = append(path, 64 << 20, &e);
	cr_assert_lt(n, 64 << 20, "wrote past the limit on the new partition");
	cr_assert_gt(n, 40 << 20, "stopped after %lld bytes, far below the limit", n);
	cr_assert(e == EDQUOT || e == ENOSPC, "no quota error: %s after %lld bytes", strerror(e), n);
}
